# throughput.gp: throughput (samples per second) against stages or microbatches, one curve per schedule.
set ylabel "throughput (samples/s)" font ",11"
set yrange [0:*]
set ytics nomirror
set xtics nomirror
set key top left font ",10"
