/*
 * The few CUDA driver API types and entry points gpuhc uses, declared here
 * because no CUDA toolkit headers exist where gpuhc is built. The library
 * itself is dlopened at run time, so a node without the driver still runs
 * every other check. Signatures follow cuda.h (CUDA 11+); the _v2 entry
 * points are the ones cuda.h maps the plain names to.
 */
#ifndef GPUHC_CUDA_SHIM_H
#define GPUHC_CUDA_SHIM_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUevent;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

#define GPUHC_CUDA_SUCCESS 0
#define GPUHC_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED 704

/* What gpuhc_copy measures. */
enum gpuhc_kind { GPUHC_H2D = 0, GPUHC_D2H = 1, GPUHC_D2D = 2, GPUHC_P2P = 3 };

struct gpuhc_cuda {
	void *handle;
	CUresult (*cuInit)(unsigned int);
	CUresult (*cuDeviceGetCount)(int *);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDeviceGetName)(char *, int, CUdevice);
	CUresult (*cuDeviceGetPCIBusId)(char *, int, CUdevice);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuCtxSynchronize)(void);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree)(CUdeviceptr);
	CUresult (*cuMemHostAlloc)(void **, size_t, unsigned int);
	CUresult (*cuMemFreeHost)(void *);
	CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
	CUresult (*cuDeviceCanAccessPeer)(int *, CUdevice, CUdevice);
	CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned int);
	CUresult (*cuMemcpyPeer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
	CUresult (*cuEventCreate)(CUevent *, unsigned int);
	CUresult (*cuEventRecord)(CUevent, CUstream);
	CUresult (*cuEventSynchronize)(CUevent);
	CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
	CUresult (*cuEventDestroy)(CUevent);
	/* Optional: names errors when the driver has it. */
	CUresult (*cuGetErrorName)(CUresult, const char **);
};

/*
 * gpuhc_load dlopens path and resolves every entry point. It returns 0, or
 * -1 when the library cannot be opened and -2 when a symbol is missing;
 * err then holds dlerror()'s text or the symbol's name.
 */
int gpuhc_load(struct gpuhc_cuda *c, const char *path, char *err, size_t errlen);

/* gpuhc_error_name is the driver's name for r, or NULL. */
const char *gpuhc_error_name(struct gpuhc_cuda *c, CUresult r);

CUresult gpuhc_init(struct gpuhc_cuda *c, int *count, const char **op);
CUresult gpuhc_describe(struct gpuhc_cuda *c, int ordinal, char *name, int namelen,
			char *pci, int pcilen, const char **op);
CUresult gpuhc_retain(struct gpuhc_cuda *c, int ordinal, CUcontext *ctx, const char **op);
CUresult gpuhc_release(struct gpuhc_cuda *c, int ordinal, const char **op);

/*
 * gpuhc_copy times iters copies of size bytes after one warm-up, with CUDA
 * events on the current context's default stream, writing each copy's
 * milliseconds to ms[0..iters). dev's context ctx is made current; for
 * P2P the copy goes from dev (ctx) to peer (peerctx), and *peer_access
 * says whether dev could reach peer directly (otherwise the driver stages
 * the copy through the host). On failure *op names the call that failed.
 */
CUresult gpuhc_copy(struct gpuhc_cuda *c, int kind, int dev, CUcontext ctx, int peer,
		    CUcontext peerctx, size_t size, int iters, float *ms, int *peer_access,
		    const char **op);

#endif
