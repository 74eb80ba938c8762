# 500 files of a gamma-distributed size with a mean of 8.9e16 bytes: their sum passes 2^64.
set $filesize=cvar(type=cvar-gamma,parameters=mean:89111111111111111;gamma:1.5)
define fileset name=big,path=/tmp,size=$filesize,entries=500,dirwidth=1000,prealloc=80
define process name=p
{
  thread name=t
  {
    flowop deletefile name=d,filesetname=big
  }
}
