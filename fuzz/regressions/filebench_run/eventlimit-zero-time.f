define process name=p,instances=1
{
  thread name=t,memsize=1m,instances=1
  {
    flowop eventlimit name=e
  }
}
run 1
