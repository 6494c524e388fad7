# common.gp: the look shared by every pipelab figure (prepended to each kind's template).
# pipelab fills in the terminal (pngcairo, svg or pdfcairo with a size), the output and the title;
# curves get their colours and markers from pipelab (one per schedule, shades within it).
set terminal @TERMINAL@
set output "@OUTPUT@"
set termoption noenhanced
set encoding utf8
set title "@TITLE@" font ",13"
set border lw 1.2 lc rgb "#444444"
set grid lc rgb "#dddddd" lw 1
set key opaque box lc rgb "#bbbbbb" Left reverse
set datafile missing "NaN"
