//go:build cgo

package bandwidth

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_shim.h"

// The implementation lives in this preamble rather than in a .c file: a
// package with C files does not build at all with CGO_ENABLED=0, and the
// static binaries must still be able to link the tool wrappers.

static void *gpuhc_sym(void *h, const char *name, const char *fallback) {
	void *p = dlsym(h, name);
	if (p == NULL && fallback != NULL) {
		p = dlsym(h, fallback);
	}
	return p;
}

int gpuhc_load(struct gpuhc_cuda *c, const char *path, char *err, size_t errlen) {
	memset(c, 0, sizeof(*c));
	// RTLD_LOCAL keeps the driver's symbols out of the global namespace
	// (go-nvml's libnvidia-ml shares names with nothing, but be safe);
	// RTLD_NOW reports a broken install here rather than mid-measurement.
	c->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (c->handle == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e != NULL ? e : "dlopen failed");
		return -1;
	}
	struct {
		void **slot;
		const char *name;
		const char *fallback;
	} syms[] = {
		{(void **)&c->cuInit, "cuInit", NULL},
		{(void **)&c->cuDeviceGetCount, "cuDeviceGetCount", NULL},
		{(void **)&c->cuDeviceGet, "cuDeviceGet", NULL},
		{(void **)&c->cuDeviceGetName, "cuDeviceGetName", NULL},
		{(void **)&c->cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", NULL},
		{(void **)&c->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL},
		// _v2 since CUDA 11; the old name has the same signature.
		{(void **)&c->cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"},
		{(void **)&c->cuCtxSetCurrent, "cuCtxSetCurrent", NULL},
		{(void **)&c->cuCtxSynchronize, "cuCtxSynchronize", NULL},
		{(void **)&c->cuMemAlloc, "cuMemAlloc_v2", NULL},
		{(void **)&c->cuMemFree, "cuMemFree_v2", NULL},
		{(void **)&c->cuMemHostAlloc, "cuMemHostAlloc", NULL},
		{(void **)&c->cuMemFreeHost, "cuMemFreeHost", NULL},
		{(void **)&c->cuMemcpyHtoD, "cuMemcpyHtoD_v2", NULL},
		{(void **)&c->cuMemcpyDtoH, "cuMemcpyDtoH_v2", NULL},
		{(void **)&c->cuMemcpyDtoD, "cuMemcpyDtoD_v2", NULL},
		{(void **)&c->cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", NULL},
		{(void **)&c->cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", NULL},
		{(void **)&c->cuMemcpyPeer, "cuMemcpyPeer", NULL},
		{(void **)&c->cuEventCreate, "cuEventCreate", NULL},
		{(void **)&c->cuEventRecord, "cuEventRecord", NULL},
		{(void **)&c->cuEventSynchronize, "cuEventSynchronize", NULL},
		{(void **)&c->cuEventElapsedTime, "cuEventElapsedTime", NULL},
		{(void **)&c->cuEventDestroy, "cuEventDestroy_v2", NULL},
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = gpuhc_sym(c->handle, syms[i].name, syms[i].fallback);
		if (*syms[i].slot == NULL) {
			snprintf(err, errlen, "%s", syms[i].name);
			// The handle stays open: dlclose of a driver library is
			// not worth its risks in a process that ends soon.
			return -2;
		}
	}
	c->cuGetErrorName = gpuhc_sym(c->handle, "cuGetErrorName", NULL);
	return 0;
}

const char *gpuhc_error_name(struct gpuhc_cuda *c, CUresult r) {
	const char *s = NULL;
	if (c->cuGetErrorName == NULL || c->cuGetErrorName(r, &s) != GPUHC_CUDA_SUCCESS) {
		return NULL;
	}
	return s;
}

#define GPUHC_TRY(call, name) do { r = (call); if (r != GPUHC_CUDA_SUCCESS) { *op = (name); goto out; } } while (0)

CUresult gpuhc_init(struct gpuhc_cuda *c, int *count, const char **op) {
	CUresult r;
	*count = 0;
	GPUHC_TRY(c->cuInit(0), "cuInit");
	GPUHC_TRY(c->cuDeviceGetCount(count), "cuDeviceGetCount");
out:
	return r;
}

CUresult gpuhc_describe(struct gpuhc_cuda *c, int ordinal, char *name, int namelen,
			char *pci, int pcilen, const char **op) {
	CUresult r;
	CUdevice d;
	name[0] = 0;
	pci[0] = 0;
	GPUHC_TRY(c->cuDeviceGet(&d, ordinal), "cuDeviceGet");
	GPUHC_TRY(c->cuDeviceGetName(name, namelen, d), "cuDeviceGetName");
	GPUHC_TRY(c->cuDeviceGetPCIBusId(pci, pcilen, d), "cuDeviceGetPCIBusId");
out:
	name[namelen - 1] = 0;
	pci[pcilen - 1] = 0;
	return r;
}

CUresult gpuhc_retain(struct gpuhc_cuda *c, int ordinal, CUcontext *ctx, const char **op) {
	CUresult r;
	CUdevice d;
	*ctx = NULL;
	GPUHC_TRY(c->cuDeviceGet(&d, ordinal), "cuDeviceGet");
	GPUHC_TRY(c->cuDevicePrimaryCtxRetain(ctx, d), "cuDevicePrimaryCtxRetain");
out:
	return r;
}

CUresult gpuhc_release(struct gpuhc_cuda *c, int ordinal, const char **op) {
	CUresult r;
	CUdevice d;
	GPUHC_TRY(c->cuDeviceGet(&d, ordinal), "cuDeviceGet");
	GPUHC_TRY(c->cuDevicePrimaryCtxRelease(d), "cuDevicePrimaryCtxRelease");
out:
	return r;
}

// one copy of the measured kind.
static CUresult gpuhc_copy_once(struct gpuhc_cuda *c, int kind, CUdeviceptr dst, CUdeviceptr src,
				void *host, CUcontext ctx, CUcontext peerctx, size_t size, const char **op) {
	CUresult r;
	switch (kind) {
	case GPUHC_H2D:
		GPUHC_TRY(c->cuMemcpyHtoD(dst, host, size), "cuMemcpyHtoD_v2");
		break;
	case GPUHC_D2H:
		GPUHC_TRY(c->cuMemcpyDtoH(host, src, size), "cuMemcpyDtoH_v2");
		break;
	case GPUHC_D2D:
		GPUHC_TRY(c->cuMemcpyDtoD(dst, src, size), "cuMemcpyDtoD_v2");
		break;
	default:
		GPUHC_TRY(c->cuMemcpyPeer(dst, peerctx, src, ctx, size), "cuMemcpyPeer");
	}
out:
	return r;
}

CUresult gpuhc_copy(struct gpuhc_cuda *c, int kind, int dev, CUcontext ctx, int peer,
		    CUcontext peerctx, size_t size, int iters, float *ms, int *peer_access,
		    const char **op) {
	CUresult r, r2;
	CUdeviceptr src = 0, dst = 0;
	void *host = NULL;
	CUevent start = NULL, stop = NULL;
	*peer_access = 0;

	GPUHC_TRY(c->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	switch (kind) {
	case GPUHC_H2D:
	case GPUHC_D2H:
		// Pinned, as jobs use for fast transfers; pageable memory
		// would measure the host's memcpy instead of the link.
		GPUHC_TRY(c->cuMemHostAlloc(&host, size, 0), "cuMemHostAlloc");
		GPUHC_TRY(c->cuMemAlloc(kind == GPUHC_H2D ? &dst : &src, size), "cuMemAlloc_v2");
		break;
	case GPUHC_D2D:
		GPUHC_TRY(c->cuMemAlloc(&src, size), "cuMemAlloc_v2");
		GPUHC_TRY(c->cuMemAlloc(&dst, size), "cuMemAlloc_v2");
		break;
	default: {
		CUdevice d, p;
		int can = 0;
		GPUHC_TRY(c->cuDeviceGet(&d, dev), "cuDeviceGet");
		GPUHC_TRY(c->cuDeviceGet(&p, peer), "cuDeviceGet");
		GPUHC_TRY(c->cuDeviceCanAccessPeer(&can, d, p), "cuDeviceCanAccessPeer");
		if (can) {
			r = c->cuCtxEnablePeerAccess(peerctx, 0);
			if (r != GPUHC_CUDA_SUCCESS && r != GPUHC_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
				*op = "cuCtxEnablePeerAccess";
				goto out;
			}
			*peer_access = 1;
		}
		GPUHC_TRY(c->cuMemAlloc(&src, size), "cuMemAlloc_v2");
		GPUHC_TRY(c->cuCtxSetCurrent(peerctx), "cuCtxSetCurrent");
		r = c->cuMemAlloc(&dst, size);
		r2 = c->cuCtxSetCurrent(ctx);
		if (r != GPUHC_CUDA_SUCCESS) {
			*op = "cuMemAlloc_v2";
			goto out;
		}
		GPUHC_TRY(r2, "cuCtxSetCurrent");
	}
	}
	GPUHC_TRY(c->cuEventCreate(&start, 0), "cuEventCreate");
	GPUHC_TRY(c->cuEventCreate(&stop, 0), "cuEventCreate");
	// The warm-up pays for first-touch mappings and clock ramp-up.
	GPUHC_TRY(gpuhc_copy_once(c, kind, dst, src, host, ctx, peerctx, size, op), *op);
	GPUHC_TRY(c->cuCtxSynchronize(), "cuCtxSynchronize");
	for (int i = 0; i < iters; i++) {
		GPUHC_TRY(c->cuEventRecord(start, NULL), "cuEventRecord");
		GPUHC_TRY(gpuhc_copy_once(c, kind, dst, src, host, ctx, peerctx, size, op), *op);
		GPUHC_TRY(c->cuEventRecord(stop, NULL), "cuEventRecord");
		GPUHC_TRY(c->cuEventSynchronize(stop), "cuEventSynchronize");
		GPUHC_TRY(c->cuEventElapsedTime(&ms[i], start, stop), "cuEventElapsedTime");
	}
out:
	// Cleanup errors are not reported: the measurement stands or has
	// already failed, and a sticky error would repeat the first one.
	if (start != NULL) c->cuEventDestroy(start);
	if (stop != NULL) c->cuEventDestroy(stop);
	if (host != NULL) c->cuMemFreeHost(host);
	if (src != 0) c->cuMemFree(src);
	if (dst != 0) {
		if (kind == GPUHC_P2P && c->cuCtxSetCurrent(peerctx) == GPUHC_CUDA_SUCCESS) {
			c->cuMemFree(dst);
			c->cuCtxSetCurrent(ctx);
		} else if (kind != GPUHC_P2P) {
			c->cuMemFree(dst);
		}
	}
	return r;
}
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// cgoCUDA is the CUDA driver reached through dlopen. Every method blocks
// for as long as the driver does; callers run them off the check's
// goroutine (see session).
type cgoCUDA struct {
	c *C.struct_gpuhc_cuda
	// contexts of retained devices, by ordinal.
	ctx map[int]C.CUcontext
}

// openCUDA loads the driver library. The struct lives in C memory so that
// the driver's function pointers are never in memory Go may move.
func openCUDA(path string) (cudaAPI, error) {
	c := (*C.struct_gpuhc_cuda)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_gpuhc_cuda{}))))
	if c == nil {
		return nil, fmt.Errorf("%s: out of memory", path)
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var errBuf [512]C.char
	switch C.gpuhc_load(c, cpath, &errBuf[0], C.size_t(len(errBuf))) {
	case 0:
		return &cgoCUDA{c: c, ctx: map[int]C.CUcontext{}}, nil
	case -1:
		// dlerror starts with the path; the result names it already.
		msg := strings.TrimPrefix(C.GoString(&errBuf[0]), path+": ")
		C.free(unsafe.Pointer(c))
		if strings.Contains(msg, "No such file") {
			return nil, &loadError{Path: path, Msg: "not found"}
		}
		return nil, &loadError{Path: path, Msg: printable(msg)}
	default:
		sym := C.GoString(&errBuf[0])
		// c is not freed: the handle stays open with it (see gpuhc_load).
		return nil, &loadError{Path: path, Msg: "no symbol " + printable(sym) + " (driver too old?)"}
	}
}

func (l *cgoCUDA) err(r C.CUresult, op *C.char) error {
	if r == 0 {
		return nil
	}
	e := &cudaError{Op: C.GoString(op), Code: int(r)}
	if n := C.gpuhc_error_name(l.c, r); n != nil {
		e.Name = C.GoString(n)
	}
	return e
}

func (l *cgoCUDA) init() (int, error) {
	var n C.int
	var op *C.char
	r := C.gpuhc_init(l.c, &n, &op)
	return int(n), l.err(r, op)
}

func (l *cgoCUDA) describe(ordinal int) (name, pci string, err error) {
	var nameBuf, pciBuf [256]C.char
	var op *C.char
	r := C.gpuhc_describe(l.c, C.int(ordinal), &nameBuf[0], C.int(len(nameBuf)), &pciBuf[0], C.int(len(pciBuf)), &op)
	if err := l.err(r, op); err != nil {
		return "", "", err
	}
	return C.GoString(&nameBuf[0]), C.GoString(&pciBuf[0]), nil
}

func (l *cgoCUDA) retain(ordinal int) error {
	var ctx C.CUcontext
	var op *C.char
	if err := l.err(C.gpuhc_retain(l.c, C.int(ordinal), &ctx, &op), op); err != nil {
		return err
	}
	l.ctx[ordinal] = ctx
	return nil
}

func (l *cgoCUDA) release(ordinal int) error {
	if _, ok := l.ctx[ordinal]; !ok {
		return nil
	}
	delete(l.ctx, ordinal)
	var op *C.char
	return l.err(C.gpuhc_release(l.c, C.int(ordinal), &op), op)
}

func (l *cgoCUDA) copy(k string, dev, peer int, size uint64, iters int) ([]float64, bool, error) {
	ctx, ok := l.ctx[dev]
	peerCtx, pok := l.ctx[peer]
	if !ok || (k == KindP2P && !pok) {
		return nil, false, fmt.Errorf("no CUDA context for device %d", dev)
	}
	kind := map[string]C.int{KindH2D: C.GPUHC_H2D, KindD2H: C.GPUHC_D2H, KindD2D: C.GPUHC_D2D, KindP2P: C.GPUHC_P2P}[k]
	ms := (*C.float)(C.calloc(C.size_t(iters), C.size_t(unsafe.Sizeof(C.float(0)))))
	if ms == nil {
		return nil, false, fmt.Errorf("out of memory")
	}
	defer C.free(unsafe.Pointer(ms))
	var access C.int
	var op *C.char
	r := C.gpuhc_copy(l.c, kind, C.int(dev), ctx, C.int(peer), peerCtx, C.size_t(size), C.int(iters), ms, &access, &op)
	if err := l.err(r, op); err != nil {
		return nil, access != 0, err
	}
	out := make([]float64, iters)
	for i, v := range unsafe.Slice(ms, iters) {
		out[i] = float64(v)
	}
	return out, access != 0, nil
}
