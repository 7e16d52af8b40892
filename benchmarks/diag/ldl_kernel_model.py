"""NumPy model of ffi/ldl_kernels.cu (same steps, same order, sequential): checked against LAPACK
?sytrf / ?sytrs from SciPy (identical pivots, solves to rounding) before the kernels first ran on
a GPU. The kernel is LAPACK ?sytf2 (unblocked); benchmarks/diag/ldl_blocked_model.py builds the
blocked ?sytrf on the helpers here. Run: python benchmarks/diag/ldl_kernel_model.py"""
import numpy as np, scipy.linalg.lapack as L
ALPHA=(1+np.sqrt(17))/8
def abs1(x): return np.abs(x.real)+np.abs(x.imag) if np.iscomplexobj(x) else np.abs(x)
def argmax(vals, begin):
    best=-1.0; bi=begin
    for off,v in enumerate(vals):
        if v>best: best=v; bi=begin+off
    return (0.0 if best<0 else best), (begin if best<0 else bi)
def bunch_kaufman(absakk, colmax, row_imax):
    """LAPACK's pivot choice for column k once |A(k,k)| and the column's largest off-diagonal
    |A(imax,k)| are known: (swap with imax?, kstep). row_imax() gives (the largest off-diagonal
    of row/column imax, |A(imax,imax)|), asked for only when needed."""
    if absakk>=ALPHA*colmax: return False, 1
    rowmax, diag=row_imax()
    if absakk>=ALPHA*colmax*(colmax/rowmax): return False, 1
    if diag>=ALPHA*rowmax: return True, 1
    return True, 2
def two_by_two(akk, ak1k, ak1k1):
    """?sytf2 / ?lasyf's 2x2 step: the multipliers of column j are d21*(d11*x_j - y_j) and
    d21*(d22*y_j - x_j) for x, y its entries in columns k, k+1."""
    d11=ak1k1/ak1k; d22=akk/ak1k; t=1/(d11*d22-1)
    return d11, d22, t/ak1k
def sytrf(A):
    A=A.copy(); n=A.shape[0]; ipiv=np.zeros(n,int); info=0; k=0
    while k<n:
        colmax,imax=argmax(abs1(A[k+1:n,k]),k+1)
        absakk=abs1(A[k,k]); kp=k; kstep=1
        zero=(absakk==0 and colmax==0) or np.isnan(absakk)
        if zero:
            if info==0: info=k+1
        else:
            def row_imax():
                rowmax,_=argmax(abs1(A[imax,k:imax]),k)
                below,_=argmax(abs1(A[imax+1:n,imax]),imax+1)
                return max(rowmax,below), abs1(A[imax,imax])
            swap,kstep=bunch_kaufman(absakk,colmax,row_imax)
            if swap: kp=imax
        if not zero:
            kk=k+kstep-1
            if kp!=kk:
                for i in range(kp+1,n): A[i,kk],A[i,kp]=A[i,kp],A[i,kk]
                for j in range(kk+1,kp): A[j,kk],A[kp,j]=A[kp,j],A[j,kk]
                A[kk,kk],A[kp,kp]=A[kp,kp],A[kk,kk]
                if kstep==2: A[k+1,k],A[kp,k]=A[kp,k],A[k+1,k]
            rows=n-k-kstep
            if kstep==1 and rows>0:   # ?syr's order: A(i,j) - x_i (x_j / D)
                r1=1/A[k,k]
                for j in range(k+1,n):
                    xj=r1*A[j,k]
                    for i in range(j,n): A[i,j]-=A[i,k]*xj
                A[k+1:,k]*=r1
            elif kstep==2 and rows>0:
                d11,d22,d21=two_by_two(A[k,k],A[k+1,k],A[k+1,k+1])
                w=np.zeros(n,A.dtype); w2=np.zeros(n,A.dtype)
                for j in range(k+2,n):
                    w[j]=d21*(d11*A[j,k]-A[j,k+1]); w2[j]=d21*(d22*A[j,k+1]-A[j,k])
                for j in range(k+2,n):
                    for i in range(j,n): A[i,j]=A[i,j]-A[i,k]*w[j]-A[i,k+1]*w2[j]
                for j in range(k+2,n): A[j,k]=w[j]; A[j,k+1]=w2[j]
        if kstep==1: ipiv[k]=kp+1
        else: ipiv[k]=ipiv[k+1]=-(kp+1)
        k+=kstep
    return np.tril(A), ipiv, info
def sytrs(A, ipiv, B):
    B=B.copy(); n=A.shape[0]
    tgt=lambda p: p-1 if 1<=p<=n else -1
    def swap(r,s):
        if s<0 or s==r: return
        B[[r,s]]=B[[s,r]]
    k=0
    while k<n:
        p=ipiv[k]
        if p>0:
            swap(k,tgt(p)); bk=B[k].copy()
            for i in range(k+1,n): B[i]-=A[i,k]*bk
            B[k]=B[k]/A[k,k]; k+=1
        else:
            swap(k+1,tgt(-p)); b0=B[k].copy(); b1=B[k+1].copy()
            for i in range(k+2,n): B[i]=B[i]-A[i,k]*b0-A[i,k+1]*b1
            akm1k=A[k+1,k]; akm1=A[k,k]/akm1k; ak=A[k+1,k+1]/akm1k; den=akm1*ak-1
            bkm1=B[k]/akm1k; bk=B[k+1]/akm1k
            B[k]=(ak*bkm1-bk)/den; B[k+1]=(akm1*bk-bkm1)/den; k+=2
    k=n-1
    while k>=0:
        p=ipiv[k]; two=p<0 and k>=1
        s0=A[k+1:,k]@B[k+1:]
        if two: s1=A[k+1:,k-1]@B[k+1:]
        B[k]-=s0
        if two: B[k-1]-=s1
        swap(k,tgt(abs(p)))
        k-= 2 if two else 1
    return B
def main():
    rng=np.random.default_rng(0)
    worst=0; n2=0; mism=0
    for trial in range(60):
        n=int(rng.integers(1,24))
        for dt in (np.float64, np.complex128):
            a=rng.standard_normal((n,n))
            if dt==np.complex128: a=a+1j*rng.standard_normal((n,n))
            a=a+a.T
            if trial%3==0: np.fill_diagonal(a, 1e-3*np.diag(a))  # force 2x2 pivots
            if trial%7==0 and n>2: a[:,1]=0; a[1,:]=0           # a zero column
            ld,piv,info=sytrf(a)
            lf=L.get_lapack_funcs(('sytf2',),dtype=dt) if hasattr(L,'dsytf2') else None
            ref_ld,ref_piv,ref_info=L.get_lapack_funcs(('sytrf',),dtype=dt)[0](a,lower=1)
            if not np.array_equal(piv,ref_piv) or info!=ref_info: mism+=1
            n2+=np.sum(piv<0)
            if info==0:
                b=rng.standard_normal((n,3)).astype(dt)
                x=sytrs(ld,piv,b)
                worst=max(worst,np.linalg.norm(a@x-b)/np.linalg.norm(b)/np.linalg.cond(a))
                xr,_=L.get_lapack_funcs(('sytrs',),dtype=dt)[0](ref_ld,ref_piv,b,lower=1)
                x2=sytrs(np.tril(ref_ld),ref_piv,b)   # our solve on LAPACK's factor
                worst=max(worst,np.linalg.norm(x2-xr)/np.linalg.norm(xr)/np.linalg.cond(a))
                if np.array_equal(piv,ref_piv): worst=max(worst,np.abs(ld-np.tril(ref_ld)).max()/np.abs(ref_ld).max()/np.linalg.cond(a))
    print("pivot/info mismatches vs LAPACK sytrf:", mism, "2x2 pivots seen:", n2, "worst scaled err:", worst)
    for n in (70, 100):
        a=rng.standard_normal((n,n)); a=a+a.T; np.fill_diagonal(a, 1e-3*np.diag(a))
        ld,piv,info=sytrf(a); ref_ld,ref_piv,_=L.dsytrf(a,lower=1)
        b=rng.standard_normal((n,2)); x=sytrs(ld,piv,b)
        print(n, "pivots equal LAPACK blocked:", np.array_equal(piv,ref_piv), "resid", np.linalg.norm(a@x-b)/np.linalg.norm(b), "2x2:", np.sum(piv<0))

if __name__=="__main__":
    main()
