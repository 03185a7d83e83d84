# Hash-heavy Perl churn: nested hashes with string keys, built and torn down.
#
# Usage: perl hash.pl ROUNDS
use strict;
use warnings;

my $rounds = shift // 20;
my $sum = 0;
for my $r (1 .. $rounds) {
    my %h;
    for my $i (1 .. 20000) {
        my $k = "key-" . (($i * 7919 + $r) % 15000);
        $h{$k}{count}++;
        push @{ $h{$k}{seen} }, $i;
        $h{$k}{label} = join(":", $k, $i, $r);
    }
    for my $k (keys %h) {
        delete $h{$k} if $h{$k}{count} % 2;
    }
    my @sorted = sort { $a cmp $b } keys %h;
    $sum += scalar(@sorted) + length(join(",", @sorted));
}
print "rounds=$rounds checksum=$sum\n";
