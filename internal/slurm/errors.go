package slurm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNoNodePost means slurmrestd offers no node POST (Slurm 22.05 serves
	// v0.0.36-38, GET only), so nodes cannot be drained over REST there.
	ErrNoNodePost = errors.New("slurmrestd offers no node POST (needs Slurm 23.02+, API v0.0.39+)")
	// ErrUnauthorized means slurmrestd or slurmctld rejected our credentials.
	ErrUnauthorized = errors.New("slurm rejected the credentials")
	// ErrEmptyReason guards against an unexplained drain: REST accepts DRAIN
	// without a reason, and such a drain cannot be attributed to gpuhc.
	ErrEmptyReason = errors.New("drain reason must not be empty")
	// ErrInvalidName is returned for a node name that is unsafe to send.
	ErrInvalidName = errors.New("invalid node name")
	// ErrNodeNotFound is returned when Slurm does not know the node.
	ErrNodeNotFound = errors.New("node not found")
)

// ConfigError is a node-control failure of gpuhc's own setup, not of
// Slurm: a token file that is missing, unsafe (group- or world-readable,
// foreign-owned) or unreadable. Callers that must tell "we are broken"
// from "Slurm is down" (the prolog's exit status) look for it.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Slurm error numbers (slurm_errno.h) that change how we treat an answer.
const (
	errnoAuth            = 1007 // SLURM_PROTOCOL_AUTHENTICATION_ERROR
	errnoInvalidNodeName = 2018 // ESLURM_INVALID_NODE_NAME
	errnoFirstESLURM     = 2000 // ESLURM_*: slurmctld understood and refused
)

// APIError is a failed slurmrestd request: the request line, the HTTP status
// and whatever slurmrestd explained in its errors array.
type APIError struct {
	Method string
	Path   string
	Status int
	Errors []RESTError
	// Body is the start of a non-JSON (or error-less) body, for diagnosis.
	Body string
	// notFound is set where the answer means "no such node" without a
	// telling error number (24.11 GET: HTTP 200, error_number 0).
	notFound bool
}

// RESTError is one entry of slurmrestd's "errors" array.
type RESTError struct {
	Description string `json:"description"`
	Error       string `json:"error"`
	ErrorNumber int    `json:"error_number"`
	Source      string `json:"source"`
}

// UnmarshalJSON also takes "errno", which 22.05's v0.0.38 node endpoints
// send instead of "error_number" (recorded).
func (re *RESTError) UnmarshalJSON(b []byte) error {
	type plain RESTError
	var v struct {
		plain
		Errno *int `json:"errno"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*re = RESTError(v.plain)
	if v.Errno != nil && re.ErrorNumber == 0 {
		re.ErrorNumber = *v.Errno
	}
	return nil
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "slurmrestd %s %s: HTTP %d", e.Method, e.Path, e.Status)
	for i, re := range e.Errors {
		sep := ": "
		if i > 0 {
			sep = "; "
		}
		b.WriteString(sep + re.String())
	}
	if len(e.Errors) == 0 && e.Body != "" {
		b.WriteString(": " + e.Body)
	}
	return b.String()
}

// Unwrap lets callers test errors.Is(err, ErrUnauthorized),
// errors.Is(err, ErrNodeNotFound), ErrJobFinished and ErrJobNotFound.
func (e *APIError) Unwrap() []error {
	var errs []error
	if e.unauthorized() {
		errs = append(errs, ErrUnauthorized)
	}
	if e.notFound || e.hasErrno(errnoInvalidNodeName) {
		errs = append(errs, ErrNodeNotFound)
	}
	if e.hasErrno(errnoJobFinished) {
		errs = append(errs, ErrJobFinished)
	}
	if e.hasErrno(errnoInvalidJobID) {
		errs = append(errs, ErrJobNotFound)
	}
	return errs
}

// unauthorized: 401 is slurmrestd refusing the token itself; 511 with
// error 1007 is slurmctld refusing it (24.11, recorded).
func (e *APIError) unauthorized() bool {
	return e.Status == 401 || e.Status == 403 || e.Status == 511 || e.hasErrno(errnoAuth)
}

// Temporary reports whether a retry may help. slurmrestd answers 502/504
// when it cannot reach slurmctld, 511 for credentials and 500 for
// everything else (http_status_from_error). 22.05 also says 500, errno -1,
// for slurmctld down. So retry 500 unless slurmctld gave a definite answer:
// an ESLURM_* error (bad node name, bad state, parser errors) or auth.
func (e *APIError) Temporary() bool {
	switch {
	case e.Status < 500, e.Status == 501, e.Status == 505, e.unauthorized():
		return false
	case e.Status != 500:
		return true
	}
	for _, re := range e.Errors {
		if re.ErrorNumber >= errnoFirstESLURM {
			return false
		}
	}
	return true
}

func (e *APIError) hasErrno(n int) bool {
	for _, re := range e.Errors {
		if re.ErrorNumber == n {
			return true
		}
	}
	return false
}

func (re RESTError) String() string {
	var parts []string
	// slurmrestd often repeats the same text in both fields; say it once.
	if re.Description != "" {
		parts = append(parts, re.Description)
	}
	if re.Error != "" && re.Error != re.Description {
		parts = append(parts, re.Error)
	}
	s := strings.Join(parts, ": ")
	var tag []string
	if re.ErrorNumber != 0 {
		tag = append(tag, fmt.Sprintf("error %d", re.ErrorNumber))
	}
	if re.Source != "" {
		tag = append(tag, "in "+re.Source)
	}
	if len(tag) > 0 {
		s = strings.TrimSpace(s + " [" + strings.Join(tag, " ") + "]")
	}
	return s
}
