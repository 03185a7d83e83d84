/* Allocates nothing: its exit dump is a heapsample dump without a single
 * allocation. */
int main(void) { return 0; }
