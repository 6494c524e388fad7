# throughput.gp: throughput (samples per second) against the pipeline depth, the stages or the
# microbatches, one curve per schedule (and per value of the variable beside x, in shades).
set ylabel "throughput (samples/s)" font ",11"
set yrange [0:*]
set ytics nomirror
set xtics nomirror
set key top left font ",10"
