# udah_asm_version_kernel, rustc 1.95.0 (59807616e 2026-04-14)
	movzwl 38(%rdi), %eax
	rolw $8, %ax
	movq 20(%rdi), %rcx
	movq 28(%rdi), %rdx
	movq %rdx, %rsi
	movd %edx, %xmm0
	shrq $32, %rdx
	shrq $48, %rsi
	movzwl 36(%rdi), %r8d
	movd %r8d, %xmm1
	movd %esi, %xmm2
	punpcklwd %xmm1, %xmm2
	movd %edx, %xmm1
	punpcklwd %xmm1, %xmm0
	punpckldq %xmm2, %xmm0
	movq %rcx, %rdx
	movd %ecx, %xmm1
	shrq $48, %rcx
	movd %ecx, %xmm2
	shrq $32, %rdx
	movd %edx, %xmm3
	punpcklwd %xmm2, %xmm3
	movzbl (%rdi), %ecx
	movzbl 20(%rdi), %edx
	pshuflw $225, %xmm1, %xmm1
	punpckldq %xmm3, %xmm1
	punpcklqdq %xmm0, %xmm1
	movdqa %xmm1, %xmm0
	psrlw $8, %xmm0
	psllw $8, %xmm1
	por %xmm0, %xmm1
	pxor %xmm0, %xmm0
	movdqa %xmm1, %xmm2
	punpckhwd %xmm0, %xmm2
	punpcklwd %xmm0, %xmm1
	paddd %xmm2, %xmm1
	movzwl %ax, %eax
	pshufd $238, %xmm1, %xmm0
	paddd %xmm1, %xmm0
	pshufd $85, %xmm0, %xmm1
	paddd %xmm0, %xmm1
	movd %xmm1, %esi
	addl %eax, %esi
	movzwl %si, %eax
	shrl $16, %esi
	addl %eax, %esi
	movl %esi, %eax
	shrl $16, %eax
	addl %esi, %eax
	movzwl 30(%rdi), %esi
	rolw $8, %si
	xorl %eax, %esi
	cmpw $-1, %si
	sete %al
	andb $-16, %cl
	movl %edx, %esi
	andb $-16, %sil
	xorl %edi, %edi
	cmpb $64, %sil
	sete %dil
	andb $15, %dl
	cmpb $5, %dl
	sete %dl
	xorl %esi, %esi
	andb %al, %dl
	movl $6, %r8d
	cmovnel %esi, %r8d
	cmpb $96, %cl
	movzbl %dl, %eax
	cmovel %eax, %edi
	cmovnel %esi, %r8d
	testb %dil, %dil
	movl $4, %eax
	cmovel %r8d, %eax
	retq
