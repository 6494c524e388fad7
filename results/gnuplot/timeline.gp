# timeline.gp: Gantt chart of one run's recorded actions, one row per rank (rank 0 on top).
# Data (index 0, compute): rank  x_center  x_halfwidth  colour(0xRRGGBB)  label  label_colour
# Data (index 1, communication, thin bars under each row): rank  x_center  x_halfwidth  colour
# pipelab then sets nranks, xmax, the ranges, the x label and the key entries (kinds in the run).
set ytics 1 nomirror scale 0 font ",10"
set format y "rank %.0f"
set xtics nomirror out font ",10"
set mxtics 5
set grid noytics xtics mxtics lc rgb "#e4e4e4"
set key outside bottom center horizontal font ",10" samplen 1.5 width 1
set style fill solid 1.0 border lc rgb "#ffffff"
set bmargin 6
# A compute box's half height, and a communication bar's offset below the row's centre and half
# height (in rows).
box_half = 0.36
bar_offset = 0.44
bar_half = 0.045
