"""Kueue's rules: Kueue of the stack's own (sized to a pool of known size) or a LocalQueue managed elsewhere, never
both, and how long Kueue waits for a step's pods (to be ready, and to recover: by default a TPU host maintenance
event, ``core.config.defaults.RECOVERY_SECONDS``)."""

from __future__ import annotations

from core.config.defaults import DEFAULT_PODS_READY, RECOVERY_SECONDS
from core.config.fields import project_key as _k
from core.config.values import Values, error
from core.machines import machine_shape
from core.names import LOCAL_QUEUE
from core.settings import KueueSettings, PoolSettings, TpuSettings


def kueue_settings(v: Values, tpu: TpuSettings, cpu_pool: PoolSettings) -> KueueSettings:
    """Kueue of our own (the default), a LocalQueue managed elsewhere, or none."""
    install, queue = v[_k("kueue.enabled")], v[_k("kueue.queue")]
    _sized_pool(install, cpu_pool)
    ready = v[_k("kueue.podsReadyTimeout")]
    ready = DEFAULT_PODS_READY[tpu.capacity] if ready is None else ready
    recovery = v[_k("kueue.recoveryTimeout")]
    return KueueSettings(
        install=install,
        queue=LOCAL_QUEUE if install else (queue or None),
        version=v[_k("kueue.version")],
        pods_ready_timeout=ready,
        admission_timeout=v[_k("kueue.admissionTimeout")],
        recovery_timeout=ready + RECOVERY_SECONDS if recovery is None else recovery,
    )


def check_own_queue(v: Values) -> None:
    """A queue managed elsewhere, or Kueue of our own: not both (checked apart from ``kueue_settings``, which needs the
    pools)."""
    queue = v[_k("kueue.queue")]
    if v[_k("kueue.enabled")] and queue:
        raise error(
            _k("kueue.queue"),
            queue,
            "names a LocalQueue managed elsewhere, but tpu-rl:kueue.enabled is true (tpu-rl installs its own "
            f"queue, {LOCAL_QUEUE}); set tpu-rl:kueue.enabled false to use {queue}, or remove tpu-rl:kueue.queue",
        )


def _sized_pool(install: bool, cpu_pool: PoolSettings) -> None:
    if install and machine_shape(cpu_pool.machine_type) is None:
        raise error(
            _k("cpuPool.machineType"),
            cpu_pool.machine_type,
            "has no known size, and Kueue's cpu and memory quota is the pool's size; use a predefined machine "
            "type such as n4-standard-64, or set tpu-rl:kueue.enabled false",
        )
