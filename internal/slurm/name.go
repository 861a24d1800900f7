package slurm

import "fmt"

// maxNameLen bounds a node name; Slurm host names are far shorter.
const maxNameLen = 255

// ValidateName accepts a single node name made of [A-Za-z0-9._-]. It keeps
// names out of URL paths and scontrol arguments where they could mean
// something else: a hostlist ("gpu[1-4]"), a second key ("x State=..."),
// an option ("-o"), or a path segment (".." or "a/b").
func ValidateName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("%w: length %d", ErrInvalidName, len(name))
	}
	if name[0] == '-' || name[0] == '.' {
		return fmt.Errorf("%w %q: must start with a letter, digit or _", ErrInvalidName, name)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return fmt.Errorf("%w %q: byte %d is not one of [A-Za-z0-9._-]", ErrInvalidName, name, i)
		}
	}
	return nil
}

func nameByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return c == '.' || c == '_' || c == '-'
}
