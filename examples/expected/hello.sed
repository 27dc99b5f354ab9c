/^this machine/,/^idle/{/^  worker /d}
s/^this machine: [0-9]+ workers on [0-9]+ NUMA/this machine: <n> workers on <m> NUMA/
s/the engine used [0-9.]+ ms of CPU/the engine used <ms> ms of CPU/
