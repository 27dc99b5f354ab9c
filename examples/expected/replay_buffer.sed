s/key +[0-9]+: producer [0-9]+ step +[0-9]+ action [01]/key <k>: producer <p> step <s> action <a>/
s/raising key [0-9]+'s/raising key <k>'s/
s/drawn [0-9]+ times/drawn <n> times/
