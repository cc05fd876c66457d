# Sourced by bench scripts that take the median of repeated runs.

# median reads one number a line on stdin and prints their median (the
# mean of the middle two, as an integer, for an even count).
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }
