# hone report charts (generated; run: gnuplot charts.gp)
reset
set terminal pngcairo size 900,400 noenhanced font ",10"
set output 'slot0-speedup.png'
set title "rmsnorm: kernel speedup per shape (median, 95% CI)"
set ylabel 'incumbent time / candidate time'
set grid ytics
set style fill solid 0.55 border -1
set boxwidth 0.60
set xrange [-0.7:5.7]
set yrange [0:*]
set bmargin 7
set lmargin 12
set key outside top center horizontal
set xtics rotate by 25 right ("rmsnorm n=64 dim=576" 0, "rmsnorm n=1 dim=576" 1, "rmsnorm n=5 dim=576" 2, "rmsnorm n=1 dim=1" 3, "rmsnorm n=3 dim=7" 4, "rmsnorm n=2 dim=33" 5)
plot 'slot0.dat' using 1:2 with boxes lc rgb '#4a7fc1' title 'median speedup', '' using 1:2:3:4 with yerrorbars lc rgb 'black' pt 0 lw 1.5 title '95% CI', 1 with lines dt 2 lc rgb '#888888' title '1.0 (no change)'
reset
set terminal pngcairo size 900,400 noenhanced font ",10"
set output 'slot0-roofline.png'
set title "rmsnorm: % of the shape's roofline (max of bytes / read bandwidth, flops / FMA peak)"
set ylabel '% of roofline'
set grid ytics
set style fill solid 0.70 border -1
set boxwidth 0.36
set xrange [-0.7:5.7]
set yrange [0:*]
set bmargin 7
set lmargin 12
set key outside top center horizontal
set xtics rotate by 25 right ("rmsnorm n=64 dim=576" 0, "rmsnorm n=1 dim=576" 1, "rmsnorm n=5 dim=576" 2, "rmsnorm n=1 dim=1" 3, "rmsnorm n=3 dim=7" 4, "rmsnorm n=2 dim=33" 5)
plot 'slot0.dat' using ($1-0.19):5 with boxes lc rgb '#c98b3c' title 'incumbent (before)', '' using ($1+0.19):6 with boxes lc rgb '#3c9a5f' title 'candidate (after)'
reset
set terminal pngcairo size 900,400 noenhanced font ",10"
set output 'slot0-timing.png'
set title "rmsnorm: time per call relative to the incumbent's median (box p25-p75, whiskers p10-p90, bar median; min/max in the table)"
set ylabel 'time / incumbent median'
set grid ytics
set style fill solid 0.75 border -1
set boxwidth 0.70
set xrange [-0.7:16.8]
set yrange [0:*]
set bmargin 7
set lmargin 12
set key outside top center horizontal
set xtics rotate by 25 right ("rmsnorm n=64 dim=576" 0.5, "rmsnorm n=1 dim=576" 3.5, "rmsnorm n=5 dim=576" 6.5, "rmsnorm n=1 dim=1" 9.5, "rmsnorm n=3 dim=7" 12.5, "rmsnorm n=2 dim=33" 15.5)
m(c) = column(c) / column(10)
plot 'slot0.dat' using ($1*3):(m(9)):(m(8)):(m(12)):(m(11)) with candlesticks whiskerbars lc rgb '#c98b3c' title 'incumbent', '' using ($1*3):(m(10)):(m(10)):(m(10)):(m(10)) with candlesticks lc rgb 'black' lw 1 notitle, '' using ($1*3+1):(m(16)):(m(15)):(m(19)):(m(18)) with candlesticks whiskerbars lc rgb '#3c9a5f' title 'candidate', '' using ($1*3+1):(m(17)):(m(17)):(m(17)):(m(17)) with candlesticks lc rgb 'black' lw 1 notitle
reset
set terminal pngcairo size 600,380 noenhanced font ",10"
set output 'slot0-e2e.png'
set title "rmsnorm: decode tokens/s per step (e2e gate)"
set ylabel 'tokens/s'
set grid ytics
set boxwidth 0.5
set style fill solid 0.4 border -1
set xrange [-0.7:1.7]
set xtics ('incumbent' 0, 'candidate' 1)
unset key
plot 'e2e0.dat' using 1:4:3:7:6 with candlesticks whiskerbars lc rgb '#4a7fc1', '' using 1:5:5:5:5 with candlesticks lc rgb 'black' lw 2, '' using 1:2 with points pt 7 ps 0.5 lc rgb '#4a7fc1', '' using 1:8 with points pt 7 ps 0.5 lc rgb '#4a7fc1'
