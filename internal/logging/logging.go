// Package logging sets up logrus
// (docs/architecture.md#configuration-and-logging): text on stderr for
// the admin (slurmd copies it into its log) and, optionally, JSON lines in
// a file for the site's log pipeline, and, optionally, the same records to
// the local syslog daemon.
package logging

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// New returns a logger writing text to stderr, JSON to cfg.File when set,
// and to syslog when cfg.Syslog is on (tagged prog unless cfg.SyslogTag
// says otherwise). Only the file can make it fail. Close the returned
// closer on exit.
func New(cfg config.Log, prog string, stderr io.Writer) (*logrus.Logger, io.Closer, error) {
	log := logrus.New()
	log.SetOutput(stderr)
	log.SetFormatter(&logrus.TextFormatter{DisableColors: true, FullTimestamp: true})
	lvl, err := logrus.ParseLevel(cfg.Level)
	if err != nil {
		return nil, nil, fmt.Errorf("log level: %w", err)
	}
	log.SetLevel(lvl)
	if cfg.File == "" {
		return log, AddSyslog(log, cfg, prog), nil
	}
	if err := os.MkdirAll(filepath.Dir(cfg.File), 0o750); err != nil {
		return nil, nil, fmt.Errorf("create log directory: %w", err)
	}
	f, err := sysread.OpenFile(cfg.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, nil, fmt.Errorf("log file: %w", err)
	}
	log.AddHook(&jsonHook{w: f, f: &logrus.JSONFormatter{}, levels: levelsUpTo(lvl)})
	return log, closers{AddSyslog(log, cfg, prog), f}, nil
}

// closers closes each in order and returns the first error.
type closers []io.Closer

func (cs closers) Close() error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

type jsonHook struct {
	w      io.Writer
	f      logrus.Formatter
	levels []logrus.Level
}

func (h *jsonHook) Levels() []logrus.Level { return h.levels }

func (h *jsonHook) Fire(e *logrus.Entry) error {
	b, err := h.f.Format(e)
	if err != nil {
		return err
	}
	_, err = h.w.Write(b)
	return err
}

func levelsUpTo(max logrus.Level) []logrus.Level {
	var out []logrus.Level
	for _, l := range logrus.AllLevels {
		if l <= max {
			out = append(out, l)
		}
	}
	return out
}
