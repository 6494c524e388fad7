# bubble.gp: bubble fraction against microbatches, one panel per pipeline depth p, one curve per
# schedule (points and lines: the runs in the database), the analytic curves dashed.
set xlabel "microbatches per iteration (m)" font ",11"
set ylabel "bubble fraction  (idle / (ranks x iteration time))" font ",11"
set yrange [0:*]
set ytics nomirror
set xtics nomirror
# The key sits outside each panel: the curves fill the panels from top left to bottom right.
set key outside right top font ",9" spacing 1.1
