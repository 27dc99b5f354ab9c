s/in [0-9.]+ ms \(submit/in <ms> ms (submit/
s/serial: [0-9.]+ ms/serial: <ms> ms/
s/on [0-9]+ workers/on <n> workers/
