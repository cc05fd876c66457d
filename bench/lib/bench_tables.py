"""What the compare_*.sh scripts share when they turn raw runs into tables.

Every benchmark here (cohort-bench, mpi_bench, ccl_bench, gloo_bench)
prints one line per size: the size in bytes first, the time per call in
us in the sixth column; lines starting with '#' are comments.
"""
import glob
import statistics


def load_medians(pattern):
    """Per size, the median time (us) over every file matching `pattern`
    (but not the runs' stderr, kept beside them as *.err)."""
    runs = {}
    for path in glob.glob(pattern):
        if path.endswith(".err"):
            continue
        for line in open(path):
            cols = line.split()
            if not line.startswith("#") and len(cols) >= 8 and cols[0].isdigit():
                runs.setdefault(int(cols[0]), []).append(float(cols[5]))
    return {size: statistics.median(times) for size, times in runs.items()}


def size_text(size):
    """64 KiB, 1 MiB, 12 B."""
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= n and size % n == 0:
            return f"{size // n} {unit}"
    return f"{size} B"
