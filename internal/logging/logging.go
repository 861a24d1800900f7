// Package logging sets up logrus as design.md §9 asks: text on stderr for
// the admin (slurmd copies it into its log) and, optionally, JSON lines in
// a file for the site's log pipeline.
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

// New returns a logger writing text to stderr and, when cfg.File is set,
// JSON to that file. Close the returned closer on exit.
func New(cfg config.Log, stderr io.Writer) (*logrus.Logger, io.Closer, error) {
	log := logrus.New()
	log.SetOutput(stderr)
	log.SetFormatter(&logrus.TextFormatter{DisableColors: true, FullTimestamp: true})
	lvl, err := logrus.ParseLevel(cfg.Level)
	if err != nil {
		return nil, nil, fmt.Errorf("log level: %w", err)
	}
	log.SetLevel(lvl)
	if cfg.File == "" {
		return log, io.NopCloser(nil), nil
	}
	if err := os.MkdirAll(filepath.Dir(cfg.File), 0o750); err != nil {
		return nil, nil, fmt.Errorf("create log directory: %w", err)
	}
	f, err := sysread.OpenFile(cfg.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, nil, fmt.Errorf("log file: %w", err)
	}
	log.AddHook(&jsonHook{w: f, f: &logrus.JSONFormatter{}, levels: levelsUpTo(lvl)})
	return log, f, nil
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
