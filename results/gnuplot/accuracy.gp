# accuracy.gp: predicted (simulated) against measured iteration time, one point per pair, with
# the y = x line and the +-5% band.
set size ratio -1
set xtics nomirror
set ytics nomirror
set key top left font ",10"
