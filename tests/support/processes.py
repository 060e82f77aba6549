"""What the fault and cluster tests read of a process from /proc: whether it still runs, its
parent, and the world rank its launcher gave it (Open MPI's OMPI_COMM_WORLD_RANK, Hydra's and
Slurm's PMI_RANK)."""


def running(pid):
    """True while the process exists and is neither a zombie nor dead."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def parent(pid):
    """The parent's pid, or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def world_rank(pid):
    """The rank the launcher gave the process, or None (not a rank, or gone)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            for item in environ.read().split(b"\0"):
                if item.startswith((b"OMPI_COMM_WORLD_RANK=", b"PMI_RANK=")):
                    return int(item.split(b"=")[1])
    except (OSError, ValueError):
        return None
    return None
