# udah_asm_net_type_by_grh, rustc 1.95.0 (59807616e 2026-04-14)
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
	movzbl 20(%rdi), %ecx
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
	movd %xmm1, %edx
	addl %eax, %edx
	movzwl %dx, %eax
	shrl $16, %edx
	addl %eax, %edx
	movl %edx, %eax
	shrl $16, %eax
	addl %edx, %eax
	movzwl 30(%rdi), %edx
	rolw $8, %dx
	xorl %eax, %edx
	cmpw $-1, %dx
	sete %al
	movzbl (%rdi), %edx
	andb $-16, %dl
	movl %ecx, %esi
	andb $-16, %sil
	xorl %r8d, %r8d
	cmpb $64, %sil
	sete %r8b
	andb $15, %cl
	cmpb $5, %cl
	sete %cl
	andb %al, %cl
	cmpb $96, %dl
	movzbl %cl, %eax
	cmovel %eax, %r8d
	cmpb $17, 6(%rdi)
	sete %al
	addb %al, %al
	incb %al
	movzbl %al, %ecx
	testb %r8b, %r8b
	movl $2, %eax
	cmovel %ecx, %eax
	retq
