# udah_asm_version_libibverbs, rustc 1.95.0 (59807616e 2026-04-14)
	movzwl 28(%rdi), %edx
	movq 20(%rdi), %xmm0
	movzbl (%rdi), %eax
	movzbl 20(%rdi), %ecx
	pxor %xmm1, %xmm1
	punpcklwd %xmm1, %xmm0
	movq 32(%rdi), %xmm2
	punpcklwd %xmm1, %xmm2
	paddd %xmm0, %xmm2
	pshufd $238, %xmm2, %xmm0
	paddd %xmm2, %xmm0
	pshufd $85, %xmm0, %xmm1
	paddd %xmm0, %xmm1
	movd %xmm1, %esi
	addl %edx, %esi
	movl %esi, %edx
	shrl $16, %edx
	addl %esi, %edx
	xorw 30(%rdi), %dx
	cmpw $-1, %dx
	sete %dl
	andb $-16, %al
	movl %ecx, %esi
	andb $-16, %sil
	xorl %edi, %edi
	cmpb $64, %sil
	sete %dil
	andb $15, %cl
	cmpb $5, %cl
	sete %cl
	xorl %esi, %esi
	andb %dl, %cl
	movl $6, %edx
	cmovnel %esi, %edx
	cmpb $96, %al
	movzbl %cl, %eax
	cmovel %eax, %edi
	cmovnel %esi, %edx
	testb %dil, %dil
	movl $4, %eax
	cmovel %edx, %eax
	retq
