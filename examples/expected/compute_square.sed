s/took [0-9]+\.[0-9]+ s$/took <seconds> s/
