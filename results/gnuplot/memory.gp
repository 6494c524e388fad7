# memory.gp: peak memory of each rank, one bar per schedule in each rank's group.
set xlabel "rank" font ",11"
set yrange [0:*]
set xtics 1 nomirror scale 0
set ytics nomirror
set grid noxtics ytics
set style fill solid 0.9 border lc rgb "#ffffff"
# the legend under the x label (the margin leaves room for both)
set key outside bottom center horizontal font ",10"
set bmargin 6
