"""Put on PYTHONPATH for benchmark engines only: SIGUSR1 dumps every thread's stack to stderr.

vLLM's engine core runs in a subprocess the harness does not start itself; this file makes that process
answer the runner's pre-kill SIGUSR1 with its stacks too, so a hung start says where it hung.
"""

import faulthandler
import signal

faulthandler.register(signal.SIGUSR1, all_threads=True)
