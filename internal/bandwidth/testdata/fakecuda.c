/*
 * A fake CUDA driver for the bandwidth tests: the entry points gpuhc
 * dlsyms, implemented with host malloc and memcpy, so that the cgo/dlopen
 * layer is tested for real on a machine without a GPU.
 *
 * Behaviour is read from the environment at each call (one library image
 * serves every test of a process):
 *   FAKECUDA_DEVICES=N      devices (default 1); 0 makes cuInit answer
 *                           CUDA_ERROR_NO_DEVICE (100)
 *   FAKECUDA_NAME=s         device name (default "Fake GPU")
 *   FAKECUDA_FAIL=sym[:n]   sym returns n (default 999) instead of working
 *   FAKECUDA_HANG=sym       sym never returns
 *   FAKECUDA_GBPS=x         copies take size/(x*1e9) seconds at least
 *   FAKECUDA_GBPS_ON=sym    ... only the copies of sym (default: all)
 *   FAKECUDA_NOPEER=1       cuDeviceCanAccessPeer answers 0
 *
 * Build: gcc -shared -fPIC -o libfakecuda.so fakecuda.c
 * -DFAKECUDA_ERROR_NAMES adds cuGetErrorName; -DFAKECUDA_OLD leaves out
 * cuMemcpyPeer, as a driver too old for gpuhc would.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUevent;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

static int initialized;
static __thread CUcontext current;
/* peer access enabled, [ctx][peer], for CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED */
static char peer_enabled[64][64];

/* env is getenv with an empty value taken as unset. */
static const char *env(const char *name) {
	const char *s = getenv(name);
	return s != NULL && *s != 0 ? s : NULL;
}

static int devices(void) {
	const char *s = env("FAKECUDA_DEVICES");
	return s != NULL ? atoi(s) : 1;
}

/* hook runs the failure and hang switches for sym; nonzero: return it. */
static CUresult hook(const char *sym) {
	const char *h = env("FAKECUDA_HANG");
	if (h != NULL && strcmp(h, sym) == 0) {
		for (;;) {
			sleep(1000);
		}
	}
	const char *f = env("FAKECUDA_FAIL");
	if (f != NULL) {
		size_t n = strlen(sym);
		if (strncmp(f, sym, n) == 0 && (f[n] == 0 || f[n] == ':')) {
			return f[n] == ':' ? atoi(f + n + 1) : 999;
		}
	}
	return 0;
}

#define HOOK(sym) do { CUresult _r = hook(sym); if (_r) return _r; } while (0)
#define NEED_INIT() do { if (!initialized) return 3; } while (0)   /* NOT_INITIALIZED */
#define NEED_CTX() do { if (current == NULL) return 201; } while (0) /* INVALID_CONTEXT */

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* copy memcpys and then waits until the configured rate is met. */
static void copy(const char *sym, void *dst, const void *src, size_t n) {
	double start = now();
	memcpy(dst, src, n);
	const char *g = env("FAKECUDA_GBPS");
	const char *on = env("FAKECUDA_GBPS_ON");
	if (g == NULL || (on != NULL && strcmp(on, sym) != 0)) {
		return;
	}
	double until = start + n / (atof(g) * 1e9);
	while (now() < until) {
		struct timespec d = {0, 50000};
		nanosleep(&d, NULL);
	}
}

static int ctx_index(CUcontext c) { return (int)(intptr_t)c - 1; }

CUresult cuInit(unsigned int flags) {
	(void)flags;
	HOOK("cuInit");
	if (devices() <= 0) {
		return 100; /* CUDA_ERROR_NO_DEVICE */
	}
	initialized = 1;
	return 0;
}

CUresult cuDeviceGetCount(int *n) {
	HOOK("cuDeviceGetCount");
	NEED_INIT();
	*n = devices();
	return 0;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	HOOK("cuDeviceGet");
	NEED_INIT();
	if (ordinal < 0 || ordinal >= devices() || ordinal >= 64) {
		return 101; /* CUDA_ERROR_INVALID_DEVICE */
	}
	*d = ordinal;
	return 0;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	(void)d;
	HOOK("cuDeviceGetName");
	NEED_INIT();
	const char *s = env("FAKECUDA_NAME");
	snprintf(name, len, "%s", s != NULL ? s : "Fake GPU");
	return 0;
}

CUresult cuDeviceGetPCIBusId(char *pci, int len, CUdevice d) {
	HOOK("cuDeviceGetPCIBusId");
	NEED_INIT();
	/* CUDA writes a 4-digit domain and upper-case hex. */
	snprintf(pci, len, "0000:%02X:00.0", 0x1b + 0x10 * d);
	return 0;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
	HOOK("cuDevicePrimaryCtxRetain");
	NEED_INIT();
	*c = (CUcontext)(intptr_t)(d + 1);
	return 0;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	(void)d;
	HOOK("cuDevicePrimaryCtxRelease_v2");
	NEED_INIT();
	return 0;
}

CUresult cuCtxSetCurrent(CUcontext c) {
	HOOK("cuCtxSetCurrent");
	current = c;
	return 0;
}

CUresult cuCtxSynchronize(void) {
	HOOK("cuCtxSynchronize");
	NEED_CTX();
	return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	HOOK("cuMemAlloc_v2");
	NEED_CTX();
	void *m = malloc(n);
	if (m == NULL) {
		return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
	}
	*p = (CUdeviceptr)(uintptr_t)m;
	return 0;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	HOOK("cuMemFree_v2");
	free((void *)(uintptr_t)p);
	return 0;
}

CUresult cuMemHostAlloc(void **p, size_t n, unsigned int flags) {
	(void)flags;
	HOOK("cuMemHostAlloc");
	NEED_CTX();
	*p = malloc(n);
	return *p == NULL ? 2 : 0;
}

CUresult cuMemFreeHost(void *p) {
	HOOK("cuMemFreeHost");
	free(p);
	return 0;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	HOOK("cuMemcpyHtoD_v2");
	NEED_CTX();
	copy("cuMemcpyHtoD_v2", (void *)(uintptr_t)dst, src, n);
	return 0;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	HOOK("cuMemcpyDtoH_v2");
	NEED_CTX();
	copy("cuMemcpyDtoH_v2", dst, (void *)(uintptr_t)src, n);
	return 0;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
	HOOK("cuMemcpyDtoD_v2");
	NEED_CTX();
	copy("cuMemcpyDtoD_v2", (void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	return 0;
}

CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice p) {
	HOOK("cuDeviceCanAccessPeer");
	NEED_INIT();
	const char *np = env("FAKECUDA_NOPEER");
	*can = d != p && !(np != NULL && strcmp(np, "1") == 0);
	return 0;
}

CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
	(void)flags;
	HOOK("cuCtxEnablePeerAccess");
	NEED_CTX();
	int a = ctx_index(current), b = ctx_index(peer);
	if (a < 0 || a >= 64 || b < 0 || b >= 64 || a == b) {
		return 1; /* CUDA_ERROR_INVALID_VALUE */
	}
	if (peer_enabled[a][b]) {
		return 704; /* CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED */
	}
	peer_enabled[a][b] = 1;
	return 0;
}

#ifndef FAKECUDA_OLD
CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n) {
	HOOK("cuMemcpyPeer");
	NEED_CTX();
	if (dctx == NULL || sctx == NULL || dctx == sctx) {
		return 201;
	}
	copy("cuMemcpyPeer", (void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	return 0;
}
#endif

CUresult cuEventCreate(CUevent *e, unsigned int flags) {
	(void)flags;
	HOOK("cuEventCreate");
	NEED_CTX();
	*e = calloc(1, sizeof(double));
	return *e == NULL ? 2 : 0;
}

CUresult cuEventRecord(CUevent e, CUstream s) {
	(void)s;
	HOOK("cuEventRecord");
	NEED_CTX();
	*(double *)e = now();
	return 0;
}

CUresult cuEventSynchronize(CUevent e) {
	(void)e;
	HOOK("cuEventSynchronize");
	return 0;
}

CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent stop) {
	HOOK("cuEventElapsedTime");
	*ms = (float)((*(double *)stop - *(double *)start) * 1e3);
	return 0;
}

CUresult cuEventDestroy_v2(CUevent e) {
	HOOK("cuEventDestroy_v2");
	free(e);
	return 0;
}

#ifdef FAKECUDA_ERROR_NAMES
CUresult cuGetErrorName(CUresult r, const char **name) {
	static char buf[64];
	snprintf(buf, sizeof(buf), "FAKE_ERROR_%d", r);
	*name = buf;
	return 0;
}
#endif
