/*
 * cr_envname.h - the environment variables a job may not set itself: the
 * node sets them (GPU selection and fencing, sharing limits, launcher
 * ranks, Corral's own), so a job spec's env or secrets must not override
 * them. One list for the controller (refused at submit, naming the field)
 * and the agent (dropped when a job's environment is built).
 *
 * Reserved: CUDA_VISIBLE_DEVICES, every NVIDIA_* (NVIDIA_VISIBLE_DEVICES
 * selects a container's GPUs), CUDA_MPS_* (a shared GPU's limits), CORRAL_*,
 * and the launcher variables MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK,
 * LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, GROUP_RANK, NNODES.
 *
 * Not reserved: LD_PRELOAD, LD_LIBRARY_PATH and the like. They act only on
 * the job's own processes, which run as the job's uid after the agent has
 * dropped its privileges (and in a container, inside it); the agent never
 * runs anything of its own with a job's environment.
 */
#ifndef CR_ENVNAME_H
#define CR_ENVNAME_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the name (len bytes, not NUL-terminated needed) is reserved. */
bool cr_env_reserved(const char *name, size_t len);

#endif
