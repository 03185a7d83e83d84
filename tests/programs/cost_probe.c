/* The profiler's cost against what the system measures: PAIRS malloc/free
 * pairs of 64 bytes (their CPU time, CLOCK_PROCESS_CPUTIME_ID, printed as
 * "loop_ns N"), then a dump to PATH through the C API when the shim is
 * there, then "ready" and a wait for a line on stdin (the test reads
 * /proc/PID/smaps meanwhile). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static long long cpu_ns(void){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec*1000000000LL+t.tv_nsec;}
__attribute__((noinline)) static void *site(size_t n){void*p=malloc(n);__asm__ volatile(""::"r"(p):"memory");return p;}
int main(int argc,char**argv){
  if(argc<3){fprintf(stderr,"usage: cost_probe PAIRS PATH\n");return 2;}
  long pairs=atol(argv[1]);
  long long start=cpu_ns();
  for(long i=0;i<pairs;i++){void*p=site(64);free(p);}
  printf("loop_ns %lld\n",cpu_ns()-start);
  int(*dump)(const char*)=(int(*)(const char*))dlsym(RTLD_DEFAULT,"heapsample_dump");
  if(dump&&dump(argv[2])!=0){fprintf(stderr,"dump failed\n");return 1;}
  printf("ready\n");fflush(stdout);
  char line[16];if(!fgets(line,sizeof line,stdin))return 1;return 0;}
