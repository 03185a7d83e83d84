/* Allocates 4 KiB blocks every 2 ms for BUSY seconds (keeping the first
 * 100,000), prints the wall-clock time it went quiet, then sleeps IDLE
 * seconds without allocating or freeing anything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_REALTIME,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){double busy=atof(argv[1]),idle=atof(argv[2]);double start=now();static char*keep[100000];long n=0;
while(now()-start<busy){char*p=malloc(4096);memset(p,1,4096);if(n<100000)keep[n++]=p;else free(p);struct timespec d={0,2000000};nanosleep(&d,0);}
printf("idle_from %.6f\n",now());fflush(stdout);struct timespec d={(time_t)idle,0};nanosleep(&d,0);return 0;}
