/* GPU binding: which CUDA device this rank drives, decided once at start-up
 * from the configured train.device, the devices this rank can see and its
 * rank on the node.  The decision lands in rt->device (-1 = CPU) so the
 * identity line and the backend choice (nccl needs a device) read one
 * place. */
#ifndef ST_DEVICE_H
#define ST_DEVICE_H

#include <stddef.h>

#include "config/config.h"
#include "runtime/runtime.h"

/* requested is cfg->train.device (errors name its line).  cpu: rt->device = -1.  auto: the GPU
 * local_rank % count when a CUDA device is visible (device 0 when
 * CUDA_VISIBLE_DEVICES names exactly one, as a launcher binding one GPU per
 * task does), else the CPU.  cuda: the same, but no device or a build
 * without CUDA is an error.  More ranks on the node than devices is an
 * error unless allow_shared.  Returns an exit status (ST_EXIT_USAGE for a
 * request this machine cannot meet); local to the rank: callers that go on
 * to collectives must agree on the result first. */
int st_device_bind(st_runtime *rt, const st_config *cfg, int allow_shared);

/* Copies between device and host memory for collectives that stage
 * through the host (the mpi backend on GPU buffers), enqueued on stream (a
 * cudaStream_t: the stream that computes on the buffers; NULL, the legacy
 * default stream) and waiting for that stream only, never for the whole
 * device.  Return an exit status. */
int st_device_copy_to_host(void *dst, const void *src, size_t bytes, void *stream);
int st_device_copy_from_host(void *dst, const void *src, size_t bytes, void *stream);

#endif
