/* A service left running: every second it allocates 64 KiB in 1 KiB
 * blocks. Until PEAK seconds it keeps them (the heap grows); for the next 3
 * seconds it frees each block right away (the heap holds its peak); then it
 * frees three quarters of what it kept and goes on allocating and freeing
 * (the heap stays lower). At MANUAL seconds (-1: never) it calls
 * heapsample_dump(NULL). Runs SECONDS seconds in all and prints the
 * wall-clock times the peak was held: "peak FROM TO". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_REALTIME,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  if(argc<4){fprintf(stderr,"usage: dump_series SECONDS PEAK MANUAL\n");return 2;}
  long seconds=atol(argv[1]),peak=atol(argv[2]),manual=atol(argv[3]);
  long capacity=(peak+1)*64;char**kept=calloc(capacity,sizeof *kept);long n=0;
  double peak_from=0,peak_to=0;
  for(long second=0;second<seconds;second++){
    if(second==manual){int(*dump)(const char*)=(int(*)(const char*))dlsym(RTLD_DEFAULT,"heapsample_dump");if(dump)dump(NULL);}
    if(second==peak+3){peak_to=now();for(long i=0;i<n;i++)if(i%4){free(kept[i]);kept[i]=0;}}
    for(int i=0;i<64;i++){char*p=malloc(1024);memset(p,(int)second,1024);
      if(second<peak&&n<capacity)kept[n++]=p;else free(p);}
    if(second==peak-1)peak_from=now();
    struct timespec d={1,0};nanosleep(&d,0);
  }
  printf("peak %.6f %.6f\n",peak_from,peak_to);return 0;}
