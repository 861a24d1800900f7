/*
 * gpuhc SPANK plugin: --gpu-health=quick|full for srun, sbatch and salloc.
 *
 * A deliberately small C shim: a Go runtime inside srun,
 * sbatch or slurmstepd's fork paths is unsafe, so all the plugin does is
 *
 *   1. register the option in every context that parses it (local = srun,
 *      allocator = sbatch/salloc, remote = slurmstepd, which is handed the
 *      option again and would otherwise log "option not found" per step);
 *   2. validate the value in the option callback, so that a bad value fails
 *      the srun/sbatch/salloc command itself, before anything is submitted;
 *   3. in the submitting command (local or allocator context) put the value
 *      in the job control environment as GPUHC_MODE; slurmd hands it to the
 *      Prolog and Epilog as SPANK_GPUHC_MODE, where gpuhc-prolog reads it.
 *
 * It defines no slurm_spank_job_prolog/job_epilog: with either, slurmd runs
 * the plugin stack around the Prolog in its own context, and that clears the
 * option variables before the Prolog runs.
 *
 * Build: make spank (SLURM_INCLUDE=... for another Slurm's headers). Slurm
 * refuses a plugin built against another major.minor, so build it once per
 * Slurm release series.
 */

#include <string.h>

#include <slurm/spank.h>

SPANK_PLUGIN(gpuhc, 1);

/* Seen by the Prolog/Epilog as SPANK_GPUHC_MODE (slurmd adds SPANK_). */
#define GPUHC_MODE_VAR "GPUHC_MODE"

/*
 * The option callback is given no spank handle, so the validated value waits
 * here for slurm_spank_init_post_opt. It only ever points at one of the
 * string literals below, never at Slurm's or the user's memory.
 */
static const char *gpuhc_mode;

/* gpuhc_parse_mode returns the canonical mode for arg, or NULL. */
static const char *gpuhc_parse_mode(const char *arg)
{
	if (arg == NULL)
		return NULL;
	if (strcmp(arg, "quick") == 0)
		return "quick";
	if (strcmp(arg, "full") == 0)
		return "full";
	return NULL;
}

/*
 * gpuhc_opt_cb validates --gpu-health; an error makes srun, sbatch or salloc
 * exit before submitting. 22.05 and 24.11 exit on any non-zero return, but
 * some releases' clients test "< 0" (ESPANK_ERROR is positive), hence -1.
 */
static int gpuhc_opt_cb(int val, const char *optarg, int remote)
{
	const char *mode = gpuhc_parse_mode(optarg);

	(void)val;
	if (mode == NULL) {
		/* %.64s: the message must stay one short line whatever was typed. */
		slurm_error("--gpu-health: \"%.64s\" is not quick or full%s",
			    optarg ? optarg : "", remote ? " (ignored)" : "");
		return -1;
	}
	gpuhc_mode = mode;
	return 0;
}

static struct spank_option gpuhc_option = {
	.name = "gpu-health",
	.arginfo = "quick|full",
	.usage = "Check the job's GPU nodes before it starts: quick (a few "
		 "seconds) or full (adds the bandwidth tests). See gpuhc-prolog.",
	.has_arg = 1,
	.val = 0,
	.cb = gpuhc_opt_cb,
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_err_t rc;

	(void)av;
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
	case S_CTX_REMOTE:
		break;
	default:
		/* slurmd itself parses no job options. */
		return 0;
	}
	if (ac > 0)
		slurm_error("gpuhc: plugstack.conf arguments are not used; "
			    "ignoring %d", ac);
	rc = spank_option_register(sp, &gpuhc_option);
	if (rc != ESPANK_SUCCESS) {
		slurm_error("gpuhc: cannot register --gpu-health: %s",
			    spank_strerror(rc));
		return -1;
	}
	return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();
	spank_err_t rc;

	(void)ac;
	(void)av;
	/*
	 * The job control environment exists only in the submitting command
	 * (slurmstepd gets ESPANK_NOT_LOCAL). It goes with the allocation
	 * (sbatch, salloc, srun outside one) or with the step (srun inside
	 * one), so the Prolog sees the value of whatever starts it: the
	 * allocation with PrologFlags=Alloc, else the node's first step.
	 */
	if ((ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR) || gpuhc_mode == NULL)
		return 0;
	rc = spank_job_control_setenv(sp, GPUHC_MODE_VAR, gpuhc_mode, 1);
	if (rc != ESPANK_SUCCESS) {
		slurm_error("--gpu-health=%s: cannot pass it to the prolog: %s",
			    gpuhc_mode, spank_strerror(rc));
		return -1;
	}
	return 0;
}
