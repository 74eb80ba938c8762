/*
 * Calibration of the CPU costs in `[stack.cpu]` (src/kernel.rs, docs/cpu.md).
 *
 * Times the kernel's data path on the machine it runs on, through tmpfs (page cache only, no
 * device): the first write of each 4 KiB page (allocation + copy), overwrites (copy only),
 * and cached preads/pwrites of 4 KiB, 64 KiB and 1 MiB. From its output:
 *   copy_bandwidth = the 1 MiB pread rate (copy_to_user + the per-page walk)
 *   syscall        = 4 KiB pread time - 4096 / copy_bandwidth
 *   page_alloc     = first-write time - overwrite time
 *
 *   gcc -O2 scripts/calibrate-cpu.c -o /tmp/calibrate-cpu && /tmp/calibrate-cpu
 * Needs /dev/shm (tmpfs). Run it a few times on a quiet machine and take the median.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  size_t fsz=256<<20; char*buf=malloc(1<<20); memset(buf,3,1<<20);
  int fd=open("/dev/shm/calib2",O_CREAT|O_RDWR|O_TRUNC,0600);
  double t0=now(); for(size_t o=0;o<fsz;o+=4096) pwrite(fd,buf,4096,o); double t1=now();
  printf("first write 4K (alloc): %.2f us\n",(t1-t0)/(fsz/4096)*1e6);
  t0=now(); for(size_t o=0;o<fsz;o+=4096) pwrite(fd,buf,4096,o); t1=now();
  printf("overwrite 4K: %.2f us\n",(t1-t0)/(fsz/4096)*1e6);
  size_t sizes[]={4096,65536,1<<20};
  for(int k=0;k<3;k++){ size_t s=sizes[k]; int n=0; t0=now(); for(int r=0;r<4;r++) for(size_t o=0;o<fsz;o+=s){pread(fd,buf,s,o);n++;} t1=now();
   printf("pread %zu: %.2f us/call, %.2f GB/s\n",s,(t1-t0)/n*1e6, 4.0*fsz/(t1-t0)/1e9);}
  for(int k=0;k<3;k++){ size_t s=sizes[k]; int n=0; t0=now(); for(int r=0;r<4;r++) for(size_t o=0;o<fsz;o+=s){pwrite(fd,buf,s,o);n++;} t1=now();
   printf("pwrite %zu: %.2f us/call, %.2f GB/s\n",s,(t1-t0)/n*1e6, 4.0*fsz/(t1-t0)/1e9);}
  unlink("/dev/shm/calib2"); return 0;}
