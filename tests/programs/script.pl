# Run by perl under the shim; deterministic output.
use strict;
use warnings;
my %h;
for my $i (0 .. 19999) {
    my $k = "key" . (($i * 7919) % 5003);
    push @{ $h{$k} }, $i;
}
my $sum = 0;
for my $k (sort keys %h) {
    $sum = ($sum * 31 + length($k) + scalar(@{ $h{$k} })) % 1000000007;
}
my $s = join(",", map { $_ x 3 } 1 .. 2000);
print "keys ", scalar(keys %h), " sum $sum len ", length($s), "\n";
my @sorted = sort { $a <=> $b } map { ($_ * 104729) % 10007 } 1 .. 10000;
print "sorted first $sorted[0] last $sorted[-1]\n";
