/^check: /!d
s/\(steps .*\)$/(<counts>)/
