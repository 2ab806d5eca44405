#!/usr/bin/env bash
# bench/plot.sh BW.dat LAT.dat OUT.png [SUBTITLE, e.g. "2026-12-05, 2 CPUs"]: the bandwidth and latency
# plot of bench/report.sh.  Each .dat is tab-separated: a header row of
# quoted series names after "size", then one row per message size, "-"
# where a series was not measured.  Series whose name says "(udp)" are
# dashed; every series has a colour and point shape of its own.
set -u
bw=$1 lat=$2 png=$3 sub=${4:-}
command -v gnuplot >/dev/null || { echo "plot: gnuplot not installed (apt-get install gnuplot-nox): no plot" >&2; exit 0; }
ncols() { head -1 "$1" | awk -F'\t' '{ print NF }'; }
# Dash type per series: the UDP path dashed, everything else solid.
dashes() { head -1 "$1" | awk -F'\t' '{ for (i = 2; i <= NF; i++) printf "%s ", ($i ~ /\(udp\)/ ? 2 : 1) }'; }
gp=$(mktemp /tmp/srn-plot.XXXXXX.gp)
trap 'rm -f "$gp"' EXIT
# One colour and point shape per series name, the same in both panels.
names=$( { head -1 "$bw"; head -1 "$lat"; } | tr '\t' '\n' | grep -v '^size$' | awk '!seen[$0]++')
styles() { # DAT -> "colour-index ..." for its series, by name
	head -1 "$1" | tr '\t' '\n' | grep -v '^size$' | while IFS= read -r n; do
		echo "$names" | grep -nxF -- "$n" | cut -d: -f1
	done | tr '\n' ' '
}
# panel LEFT RIGHT TITLE YLABEL DAT: one plot, between LEFT and RIGHT
# (screen fractions), its legend centred below it.
panel() {
	local st; st=$(styles "$5")
	cat <<EOF3
set lmargin at screen $1
set rmargin at screen $2
set key at screen $(awk -v l="$1" -v r="$2" 'BEGIN { print (l + r) / 2 }'), 0.15 center center
set title "$3"
set ylabel "$4"
plot for [i=2:$(ncols "$5")] "$5" using 1:i with linespoints lw 2 ps 1.2 \\
	pt int(word("$st", i-1)) lc rgb word(colors, int(word("$st", i-1))) \\
	dt int(word("$(dashes "$5")", i-1))
EOF3
}
cat >"$gp" <<EOF2
set terminal pngcairo size 1600,900 font ",11"
set output "$png.tmp"
set datafile separator "\t"
set datafile missing "-"
set termoption noenhanced
# 12 colours that differ in hue or lightness: no two series alike.
colors = "#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #17becf #8c564b #e377c2 #000000 #bcbd22 #7f7f7f #393b79"
set logscale xy
set format y "%g"
set xtics ("2" 2, "8" 8, "64" 64, "512" 512, "4K" 4096, "64K" 65536, "1M" 1048576, "8M" 8388608)
set xrange [1.5:12000000]
set grid
set xlabel "message size (bytes)"
# Fixed margins: the legend sits in its own band under each panel, clear
# of the axis label (gnuplot's "key below" can draw the two over each other).
set tmargin at screen 0.90
set bmargin at screen 0.31
set key horizontal maxrows 3 autotitle columnhead spacing 1.3 width 2 box opaque
set multiplot title "softrnic vs baselines${sub:+, $sub}   (dashed: SOFTRNIC_TRANSPORT=udp)"
$(panel 0.06 0.48 "bandwidth vs message size" "GB/s" "$bw")
$(panel 0.56 0.98 "latency vs message size (one way)" "us" "$lat")
unset multiplot
EOF2
if gnuplot "$gp" >"$png.log" 2>&1 && [ -s "$png.tmp" ]; then
	mv "$png.tmp" "$png"
	rm -f "$png.log"
else
	rm -f "$png.tmp"
	echo "plot: gnuplot failed (see $png.log)" >&2
fi
