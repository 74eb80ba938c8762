define fileset name=f,path=/data/fb,size=4k,entries=4,dirwidth=2,prealloc=100
define process name=p,instances=1
{
  thread name=t,memsize=1m,instances=1
  {
    flowop delay name=d,value=0
  }
}
run 1
