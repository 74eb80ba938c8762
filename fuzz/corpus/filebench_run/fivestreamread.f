# fivestreamread: five threads, each reading its own preallocated 1 GiB file sequentially in
# 1 MiB reads, wrapping at the end. Parameters of filebench's workloads/fivestreamread.f ("Five
# Stream Read Version 3.0"); the context-aware thesis used it (made to read one shared file)
# to size its 2 GB subregions and batch of 16 (§6.1).

set $dir=/tmp
set $filesize=1g
set $nthreads=1
set $iosize=1m
set $runtime=60

define file name=largefile1,path=$dir,size=$filesize,prealloc,reuse
define file name=largefile2,path=$dir,size=$filesize,prealloc,reuse
define file name=largefile3,path=$dir,size=$filesize,prealloc,reuse
define file name=largefile4,path=$dir,size=$filesize,prealloc,reuse
define file name=largefile5,path=$dir,size=$filesize,prealloc,reuse

define process name=seqread,instances=1
{
  thread name=seqread1,memsize=10m,instances=$nthreads
  {
    flowop read name=seqread1,filename=largefile1,iosize=$iosize
  }
  thread name=seqread2,memsize=10m,instances=$nthreads
  {
    flowop read name=seqread2,filename=largefile2,iosize=$iosize
  }
  thread name=seqread3,memsize=10m,instances=$nthreads
  {
    flowop read name=seqread3,filename=largefile3,iosize=$iosize
  }
  thread name=seqread4,memsize=10m,instances=$nthreads
  {
    flowop read name=seqread4,filename=largefile4,iosize=$iosize
  }
  thread name=seqread5,memsize=10m,instances=$nthreads
  {
    flowop read name=seqread5,filename=largefile5,iosize=$iosize
  }
}

echo "Five Stream Read Version 3.0 personality successfully loaded"

run $runtime
