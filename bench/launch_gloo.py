"""launch_gloo: what bench/launch_bench.sh times under torchrun: join the
job through env:// (torchrun's agent hosts the TCPStore), one Gloo barrier,
leave. The torch side of the comparison with bench/launch_cohort.

Python, because that is what torchrun's users run, and because torch's pip
package does not ship the gloo headers a C++ twin would need. Its time so
includes starting Python and importing torch, which launch_bench.sh
measures on its own and prints beside it.
"""

import torch.distributed as dist

dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
