# common.gp: the look shared by every pipelab figure (prepended to each kind's template).
# pipelab fills @TERMINAL@ (pngcairo or svg with a size), @OUTPUT@ and @TITLE@.
set terminal @TERMINAL@
set output "@OUTPUT@"
set termoption noenhanced
set encoding utf8
set title "@TITLE@" font ",13"
set border lw 1.2 lc rgb "#444444"
set grid lc rgb "#dddddd" lw 1
set key opaque box lc rgb "#bbbbbb"
set datafile missing "NaN"
# One colour per schedule, the same in every figure (Tableau 10).
set linetype 1 lc rgb "#4E79A7" lw 2 pt 6 ps 1.9
set linetype 2 lc rgb "#F28E2B" lw 2 pt 5 ps 1.1
set linetype 3 lc rgb "#E15759" lw 2 pt 9 ps 1.3
set linetype 4 lc rgb "#59A14F" lw 2 pt 11 ps 1.3
set linetype 5 lc rgb "#B07AA1" lw 2 pt 13 ps 1.3
set linetype 6 lc rgb "#76B7B2" lw 2 pt 6 ps 1.9
set linetype 7 lc rgb "#EDC948" lw 2 pt 5 ps 1.1
set linetype 8 lc rgb "#9C755F" lw 2 pt 9 ps 1.3
set linetype 9 lc rgb "#FF9DA7" lw 2 pt 11 ps 1.3
set linetype 10 lc rgb "#333333" lw 2 pt 13 ps 1.3
set linetype cycle 10
