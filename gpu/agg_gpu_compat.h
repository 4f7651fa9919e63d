/*
 * The few runtime names the GPU backends use, spelled once for CUDA and once
 * for HIP, so that agg_gpu_rt.cu and agg_gpu_kernels.cu are one source that
 * nvcc and hipcc both compile. Only what those two files call is here.
 */
#ifndef AGG_GPU_COMPAT_H
#define AGG_GPU_COMPAT_H

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#define AGG_GPU_HIP 1
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#include <hip/hip_version.h>
#else
#define AGG_GPU_HIP 0
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

#if AGG_GPU_HIP

#define AGG_GPU_RT_NAME  "rocm"
#define AGG_GPU_RT_HUMAN "ROCm/HIP"
#define AGG_GPU_MEM_TYPE 2 /* AGG_MEM_ROCM */

typedef hipError_t      gpuError_t;
typedef hipStream_t     gpuStream_t;
typedef hipEvent_t      gpuEvent_t;
typedef hipDeviceProp_t gpuDeviceProp;
typedef hipPointerAttribute_t gpuPointerAttributes;

#define gpuSuccess               hipSuccess
#define gpuErrorInvalidValue     hipErrorInvalidValue
#define gpuErrorNotReady         hipErrorNotReady
#define gpuGetErrorString        hipGetErrorString
#define gpuGetErrorName          hipGetErrorName
#define gpuGetLastError          hipGetLastError
#define gpuGetDeviceCount        hipGetDeviceCount
#define gpuGetDevice             hipGetDevice
#define gpuSetDevice             hipSetDevice
#define gpuGetDeviceProperties   hipGetDeviceProperties
#define gpuDeviceGetAttribute    hipDeviceGetAttribute
#define gpuDeviceGetPCIBusId     hipDeviceGetPCIBusId
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking     hipStreamNonBlocking
#define gpuStreamDestroy         hipStreamDestroy
#define gpuStreamSynchronize     hipStreamSynchronize
#define gpuEventCreateWithFlags  hipEventCreateWithFlags
#define gpuEventDisableTiming    hipEventDisableTiming
#define gpuEventDestroy          hipEventDestroy
#define gpuEventRecord           hipEventRecord
#define gpuEventQuery            hipEventQuery
#define gpuHostAlloc             hipHostMalloc
#define gpuHostAllocPortable     hipHostMallocPortable
#define gpuFreeHost              hipHostFree
#define gpuMalloc                hipMalloc
#define gpuFree                  hipFree
#define gpuHostRegister          hipHostRegister
#define gpuHostRegisterPortable  hipHostRegisterPortable
#define gpuHostUnregister        hipHostUnregister
#define gpuMemcpyAsync           hipMemcpyAsync
#define gpuMemcpyDefault         hipMemcpyDefault
#define gpuPointerGetAttributes  hipPointerGetAttributes
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor

#define gpuDevAttrMultiProcessorCount    hipDeviceAttributeMultiprocessorCount
#define gpuDevAttrComputeCapabilityMajor hipDeviceAttributeComputeCapabilityMajor
#define gpuDevAttrComputeCapabilityMinor hipDeviceAttributeComputeCapabilityMinor
#define gpuDevAttrCanMapHostMemory       hipDeviceAttributeCanMapHostMemory
#define gpuDevAttrPageableMemoryAccess   hipDeviceAttributePageableMemoryAccess

#else /* CUDA */

#define AGG_GPU_RT_NAME  "cuda"
#define AGG_GPU_RT_HUMAN "CUDA"
#define AGG_GPU_MEM_TYPE 1 /* AGG_MEM_CUDA */

typedef cudaError_t      gpuError_t;
typedef cudaStream_t     gpuStream_t;
typedef cudaEvent_t      gpuEvent_t;
typedef cudaDeviceProp   gpuDeviceProp;
typedef cudaPointerAttributes gpuPointerAttributes;

#define gpuSuccess               cudaSuccess
#define gpuErrorInvalidValue     cudaErrorInvalidValue
#define gpuErrorNotReady         cudaErrorNotReady
#define gpuGetErrorString        cudaGetErrorString
#define gpuGetErrorName          cudaGetErrorName
#define gpuGetLastError          cudaGetLastError
#define gpuGetDeviceCount        cudaGetDeviceCount
#define gpuGetDevice             cudaGetDevice
#define gpuSetDevice             cudaSetDevice
#define gpuGetDeviceProperties   cudaGetDeviceProperties
#define gpuDeviceGetAttribute    cudaDeviceGetAttribute
#define gpuDeviceGetPCIBusId     cudaDeviceGetPCIBusId
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking     cudaStreamNonBlocking
#define gpuStreamDestroy         cudaStreamDestroy
#define gpuStreamSynchronize     cudaStreamSynchronize
#define gpuEventCreateWithFlags  cudaEventCreateWithFlags
#define gpuEventDisableTiming    cudaEventDisableTiming
#define gpuEventDestroy          cudaEventDestroy
#define gpuEventRecord           cudaEventRecord
#define gpuEventQuery            cudaEventQuery
#define gpuHostAlloc             cudaHostAlloc
#define gpuHostAllocPortable     cudaHostAllocPortable
#define gpuFreeHost              cudaFreeHost
#define gpuMalloc                cudaMalloc
#define gpuFree                  cudaFree
#define gpuHostRegister          cudaHostRegister
#define gpuHostRegisterPortable  cudaHostRegisterPortable
#define gpuHostUnregister        cudaHostUnregister
#define gpuMemcpyAsync           cudaMemcpyAsync
#define gpuMemcpyDefault         cudaMemcpyDefault
#define gpuPointerGetAttributes  cudaPointerGetAttributes
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor

#define gpuDevAttrMultiProcessorCount    cudaDevAttrMultiProcessorCount
#define gpuDevAttrComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define gpuDevAttrComputeCapabilityMinor cudaDevAttrComputeCapabilityMinor
#define gpuDevAttrCanMapHostMemory       cudaDevAttrCanMapHostMemory
#define gpuDevAttrPageableMemoryAccess   cudaDevAttrPageableMemoryAccess

#endif

/*
 * agg/gpu.h read as C++: the function agg_gpu_ops() shares its name with the
 * tag of struct agg_gpu_ops, which -Wshadow reports as hiding a constructor.
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#include "agg/gpu.h"
#pragma GCC diagnostic pop

/* hipMemoryTypeHost, cudaMemoryTypeDevice, ... */
#if AGG_GPU_HIP
#define AGG_GPU_MEMTYPE(_x) hipMemoryType##_x
#else
#define AGG_GPU_MEMTYPE(_x) cudaMemoryType##_x
#endif

/*
 * What a pointer query says about plain host memory where the runtime does
 * not answer "unregistered" (HIP 5; CUDA before 11).
 */
#define AGG_GPU_PTR_UNKNOWN_ERR gpuErrorInvalidValue

/* The runtime's real name for a call, for error sentences: "cudaMalloc". */
#define AGG_GPU_STR2(_x) #_x
#define AGG_GPU_STR(_x)  AGG_GPU_STR2(_x)

/* Between the two files of one backend; hidden like everything but agg_gpu_backend. */
extern "C" {
int agg_gpu_kernel_supported(int dtype, int op);
int agg_gpu_kernel_reduce(void *inout, const void *in, size_t count, int dtype, int op,
                          void *stream);
/* Why the last agg_gpu_kernel_reduce on this thread returned -1: a sentence. */
const char *agg_gpu_kernel_why(void);
}

#endif
