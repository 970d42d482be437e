"""Rewrite each `kernel<...><<<grid, threads, smem, stream>>>(args)` launch
in a .cu file into `emu_launch(dim3(grid), kThreads, [=]() { kernel<...>(args); })`
so g++ can compile it against shim.h (the host emulation of the CUDA
features used).  Written for the launch style of cuda/attention.cu: the
launch starts a line and names kThreads as its block size."""
import re,sys
s=open(sys.argv[1]).read()
out=[];i=0
while True:
    j=s.find('<<<',i)
    if j<0: out.append(s[i:]); break
    # kernel expression starts after last whitespace/newline before j
    k=j
    k=s.rfind('\n',0,j)+1
    while s[k] in ' \t': k+=1
    name=s[k:j]
    e=s.find('>>>',j); cfg=s[j+3:e]
    assert s[e+3]=='('
    depth=0;p=e+3
    while True:
        if s[p]=='(': depth+=1
        elif s[p]==')':
            depth-=1
            if depth==0: break
        p+=1
    args=s[e+4:p]
    grid=cfg.split(',')[0] if not cfg.startswith('(') else cfg.rsplit(', kThreads',1)[0]
    out.append(s[i:k]); out.append('emu_launch(dim3(%s), kThreads, [=]() { %s(%s); })'%(grid,name,args))
    i=p+1
print(''.join(out))
