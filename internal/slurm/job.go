package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// JobCommenter sets a job's AdminComment. Client, REST and Scontrol
// implement it; it is not part of Controller, which is about nodes.
type JobCommenter interface {
	SetAdminComment(ctx context.Context, jobID, comment string) error
}

var (
	_ JobCommenter = (*Client)(nil)
	_ JobCommenter = (*REST)(nil)
	_ JobCommenter = (*Scontrol)(nil)
)

var (
	// ErrJobFinished means slurmctld refused to update a job because it is
	// completing or completed (ESLURM_JOB_FINISHED, 2084: "Job has already
	// finished"). A job's Epilog runs while the job is COMPLETING, so on
	// Slurm 22.05, 24.11 and 26.05 every update from the Epilog gets this
	// answer (verified on the test beds, scontrol and REST alike).
	ErrJobFinished = errors.New("job already finished")
	// ErrJobNotFound means slurmctld does not know the job
	// (ESLURM_INVALID_JOB_ID, 2017).
	ErrJobNotFound = errors.New("job not found")
	// ErrInvalidJobID is returned for a job id that is unsafe to send.
	ErrInvalidJobID = errors.New("invalid job id")
)

const (
	errnoInvalidJobID = 2017 // ESLURM_INVALID_JOB_ID
	errnoJobFinished  = 2084 // ESLURM_JOB_FINISHED
)

// maxComment bounds an AdminComment we send. Slurm sets no limit of its
// own that we rely on; callers cap their summaries well below this.
const maxComment = 1024

// ValidateJobID accepts a plain numeric job id, as slurmd gives the
// Epilog in SLURM_JOB_ID.
func ValidateJobID(id string) error {
	if id == "" || len(id) > 10 || strings.TrimLeft(id, "0123456789") != "" {
		return fmt.Errorf("%w %q: want digits only", ErrInvalidJobID, id)
	}
	return nil
}

// checkComment refuses an empty comment, one with control characters (a
// newline would make it two lines in sacct and scontrol) and one over
// maxComment bytes.
func checkComment(c string) error {
	if strings.TrimSpace(c) == "" {
		return errors.New("admin comment must not be empty")
	}
	if len(c) > maxComment {
		return fmt.Errorf("admin comment of %d bytes: at most %d", len(c), maxComment)
	}
	for i, r := range c {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("admin comment has a control character at byte %d", i)
		}
	}
	return nil
}

// SetAdminComment sets job jobID's AdminComment, with the same backend
// choice and fallback as the node operations. A definite answer from
// slurmctld (the job finished, or unknown) is not repeated on scontrol.
func (c *Client) SetAdminComment(ctx context.Context, jobID, comment string) error {
	if err := ValidateJobID(jobID); err != nil {
		return err
	}
	if err := checkComment(comment); err != nil {
		return err
	}
	return c.with(ctx, "set the admin comment of job "+jobID, func(ctl Controller) error {
		jc, ok := ctl.(JobCommenter)
		if !ok {
			return fmt.Errorf("%s cannot update jobs", ctl.Backend())
		}
		return jc.SetAdminComment(ctx, jobID, comment)
	})
}

// jobUpdate is the body of POST /slurm/vX/job/{job_id}: a job_desc_msg
// of which we set one field. admin_comment is in v0.0.40-42 (24.11) and
// v0.0.42-45 (26.05), recorded from each slurmrestd's /openapi/v3;
// 22.05's v0.0.38 job_properties has only "comment".
type jobUpdate struct {
	AdminComment string `json:"admin_comment"`
}

// SetAdminComment posts {"admin_comment": comment} to the job on the
// write version (the highest with a node POST, v0.0.39+, whose job
// update takes admin_comment).
func (r *REST) SetAdminComment(ctx context.Context, jobID, comment string) error {
	if err := ValidateJobID(jobID); err != nil {
		return err
	}
	if err := checkComment(comment); err != nil {
		return err
	}
	body, err := json.Marshal(jobUpdate{AdminComment: comment})
	if err != nil {
		return fmt.Errorf("encode job update: %w", err)
	}
	return r.versioned(ctx, func(v apiVersions) error {
		w, err := postVersion(v)
		if err != nil {
			return err
		}
		_, err = r.call(ctx, request{method: "POST", path: jobPath(w, jobID), body: body})
		return err
	})
}

func jobPath(version, id string) string {
	return "/slurm/" + version + "/job/" + url.PathEscape(id)
}

// SetAdminComment runs `scontrol update JobId=ID AdminComment=COMMENT`,
// the comment one argument however many spaces it holds.
func (s *Scontrol) SetAdminComment(ctx context.Context, jobID, comment string) error {
	if err := ValidateJobID(jobID); err != nil {
		return err
	}
	if err := checkComment(comment); err != nil {
		return err
	}
	_, err := s.run(ctx, "update", "JobId="+jobID, "AdminComment="+comment)
	return err
}

// jobText recognises scontrol's job answers (recorded on 22.05, 24.11
// and 26.05): "Job has already finished for job N" and "Invalid job id
// specified for job N".
func jobText(s string) error {
	switch {
	case strings.Contains(s, "Job has already finished"):
		return ErrJobFinished
	case strings.Contains(s, "Invalid job id specified"):
		return ErrJobNotFound
	}
	return nil
}
