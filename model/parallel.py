"""Two-core helpers for the bulk numpy loops of the format tools.

numpy releases the GIL in copies, ``extract`` and ``flatnonzero``, so cutting a big copy into
tasks and running them on a small thread pool uses both cores of the development machine.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

_POOL: ThreadPoolExecutor | None = None
WORKERS = 2


def run(fn, tasks):
    """fn(*task) for each task, results in order; on the pool when there is more than one."""
    global _POOL
    tasks = list(tasks)
    if len(tasks) == 1:
        return [fn(*tasks[0])]
    if _POOL is None:
        _POOL = ThreadPoolExecutor(WORKERS, thread_name_prefix="atomcube")
    return list(_POOL.map(lambda t: fn(*t), tasks))
