# bubble.gp: bubble fraction against microbatches, one panel per pipeline depth p (and tag), one
# curve per schedule (points and lines: the runs in the database), the analytic curves dashed.
# pipelab frames each panel and draws one legend for all of them in a column on the right.
set xlabel "microbatches per iteration (m)" font ",11"
set ylabel "bubble fraction  (idle / (ranks x iteration time))" font ",11"
set yrange [0:*]
set ytics nomirror
set xtics nomirror
unset key
