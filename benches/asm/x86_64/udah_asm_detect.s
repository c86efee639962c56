# udah_asm_detect, rustc 1.95.0 (59807616e 2026-04-14)
	pushq %rbp
	pushq %r15
	pushq %r14
	pushq %r13
	pushq %r12
	pushq %rbx
	movzbl (%rdi), %r14d
	movzbl 6(%rdi), %r12d
	movzbl 20(%rdi), %r15d
	movdqu 20(%rdi), %xmm0
	pextrw $7, %xmm0, %ebx
	pextrw $6, %xmm0, %ebp
	pextrw $5, %xmm0, %eax
	movl %eax, -4(%rsp)
	pextrw $4, %xmm0, %eax
	movl %eax, -8(%rsp)
	pextrw $3, %xmm0, %eax
	movl %eax, -12(%rsp)
	pextrw $2, %xmm0, %eax
	movzwl 36(%rdi), %r8d
	pextrw $1, %xmm0, %r9d
	movd %xmm0, %r11d
	movzwl 38(%rdi), %r10d
	movzwl 30(%rdi), %edx
	movzbl (%rsi), %ecx
	testl %ecx, %ecx
	je .L0
	cmpl $1, %ecx
	jne .L1
	movzbl 1(%rsi), %edi
	cmpb $2, %dil
	sete %sil
	setb -25(%rsp)
	cmpb $3, %dil
	sete %r13b
	jmp .L2
.L0:
	movb $1, %r13b
	movb $1, -25(%rsp)
	movb $1, %sil
	jmp .L2
.L1:
	movl %ebx, -20(%rsp)
	movq (%rdi), %rbx
	movl %r8d, -16(%rsp)
	movq 8(%rdi), %r8
	movl 16(%rdi), %edi
	movl %ebp, -24(%rsp)
	movq 9(%rsi), %rbp
	xorq %r8, %rbp
	movl %ecx, %r13d
	movl %r12d, %ecx
	movl %r15d, %r12d
	movq 1(%rsi), %r15
	xorq %rbx, %r15
	movl 17(%rsi), %esi
	xorl %edi, %esi
	orq %r15, %rsi
	movl %r12d, %r15d
	movl %ecx, %r12d
	movl %r13d, %ecx
	orq %rbp, %rsi
	setne %r13b
	sete %bpl
	orq %rdi, %rbx
	orq %r8, %rbx
	movl -20(%rsp), %ebx
	movl -16(%rsp), %r8d
	sete %sil
	orb %bpl, %sil
	movl -24(%rsp), %ebp
	movb %r13b, -25(%rsp)
.L2:
	movd %r11d, %xmm0
	movd %r9d, %xmm1
	movd %eax, %xmm2
	movd -12(%rsp), %xmm3
	movd -8(%rsp), %xmm4
	movd -4(%rsp), %xmm5
	andb $-16, %r14b
	cmpb $96, %r14b
	punpcklwd %xmm1, %xmm0
	punpcklwd %xmm3, %xmm2
	punpckldq %xmm2, %xmm0
	movd %ebp, %xmm1
	sete %al
	cmpb $27, %r12b
	sete %bpl
	andb %al, %bpl
	punpcklwd %xmm5, %xmm4
	movd %ebx, %xmm2
	movb $2, %bl
	subb %bpl, %bl
	punpcklwd %xmm2, %xmm1
	punpckldq %xmm1, %xmm4
	punpcklqdq %xmm4, %xmm0
	movdqa %xmm0, %xmm1
	psrlw $8, %xmm1
	psllw $8, %xmm0
	por %xmm1, %xmm0
	movd %r8d, %xmm1
	movdqa %xmm1, %xmm2
	psrlw $8, %xmm2
	psllw $8, %xmm1
	por %xmm2, %xmm1
	pxor %xmm2, %xmm2
	shufps $228, %xmm0, %xmm1
	punpcklwd %xmm2, %xmm0
	shufps $216, %xmm1, %xmm1
	pshuflw $232, %xmm1, %xmm1
	pshufd $236, %xmm1, %xmm1
	pshuflw $57, %xmm1, %xmm1
	punpcklwd %xmm2, %xmm1
	paddd %xmm0, %xmm1
	rolw $8, %r10w
	movzwl %r10w, %edi
	pshufd $238, %xmm1, %xmm0
	paddd %xmm1, %xmm0
	pshufd $85, %xmm0, %xmm1
	paddd %xmm0, %xmm1
	movd %xmm1, %r8d
	addl %edi, %r8d
	movzwl %r8w, %edi
	shrl $16, %r8d
	addl %edi, %r8d
	movl %r8d, %edi
	shrl $16, %edi
	addl %r8d, %edi
	cmpb $17, %r12b
	sete %r8b
	andb %al, %r8b
	movl %ebp, %eax
	orb %r8b, %al
	xorl %r9d, %r9d
	cmpb $69, %r15b
	sete %r9b
	rolw $8, %dx
	xorl %edi, %edx
	cmpw $-1, %dx
	sete %dl
	andb %r9b, %dl
	testb %cl, %cl
	setne %cl
	movzbl %dl, %edx
	cmovel %edx, %r9d
	andb -25(%rsp), %bpl
	andb %r13b, %r8b
	orb %bpl, %r8b
	orb %al, %cl
	orb %cl, %dl
	xorb $5, %dl
	movzbl %dl, %eax
	movzbl %bl, %ecx
	testb %r8b, %r8b
	cmovel %eax, %ecx
	testb %sil, %sil
	leal 3(%r8), %eax
	movzbl %al, %eax
	cmovel %ecx, %eax
	testb %r9b, %r9b
	cmovel %ecx, %eax
	popq %rbx
	popq %r12
	popq %r13
	popq %r14
	popq %r15
	popq %rbp
	retq
