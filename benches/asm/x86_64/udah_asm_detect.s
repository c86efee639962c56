# udah_asm_detect, rustc 1.95.0 (59807616e 2026-04-14)
	pushq %rbp
	pushq %r15
	pushq %r14
	pushq %r13
	pushq %r12
	pushq %rbx
	movzbl (%rdi), %r14d
	movzbl 6(%rdi), %r9d
	movzbl 20(%rdi), %eax
	movb %al, -9(%rsp)
	movdqu 20(%rdi), %xmm0
	pextrw $7, %xmm0, %ebx
	pextrw $6, %xmm0, %ebp
	pextrw $5, %xmm0, %r15d
	pextrw $4, %xmm0, %r13d
	pextrw $3, %xmm0, %r12d
	pextrw $2, %xmm0, %eax
	movzwl 36(%rdi), %ecx
	movl %ecx, -4(%rsp)
	pextrw $1, %xmm0, %edx
	movd %xmm0, %r11d
	movzwl 38(%rdi), %r10d
	movzwl 30(%rdi), %r8d
	movzbl (%rsi), %ecx
	testl %ecx, %ecx
	je .L0
	cmpl $1, %ecx
	jne .L1
	movzbl 1(%rsi), %esi
	cmpb $2, %sil
	sete -11(%rsp)
	setb %dil
	cmpb $3, %sil
	sete %sil
	jmp .L2
.L0:
	movb $1, %sil
	movb $1, %dil
	movb $1, -11(%rsp)
	jmp .L2
.L1:
	movdqu 1(%rsi), %xmm0
	movdqu (%rdi), %xmm1
	pxor %xmm0, %xmm1
	movl 16(%rdi), %edi
	pshufd $238, %xmm1, %xmm0
	movl %ebp, -8(%rsp)
	movb %r9b, -10(%rsp)
	movq %xmm0, %r9
	movl %r12d, %ebp
	movl %r13d, %r12d
	movl %ecx, %r13d
	movl %r15d, %ecx
	movl %ebx, %r15d
	movq %xmm1, %rbx
	xorl 17(%rsi), %edi
	orq %rbx, %rdi
	movl %r15d, %ebx
	movl %ecx, %r15d
	movl %r13d, %ecx
	movl %r12d, %r13d
	movl %ebp, %r12d
	orq %r9, %rdi
	movzbl -10(%rsp), %r9d
	movl -8(%rsp), %ebp
	sete -11(%rsp)
	setne %sil
	movl %esi, %edi
.L2:
	movd %r11d, %xmm0
	movd %edx, %xmm1
	movd %eax, %xmm2
	movd %r12d, %xmm3
	movd %r13d, %xmm4
	movd %r15d, %xmm5
	andb $-16, %r14b
	cmpb $96, %r14b
	punpcklwd %xmm1, %xmm0
	punpcklwd %xmm3, %xmm2
	punpckldq %xmm2, %xmm0
	movd %ebp, %xmm1
	sete %al
	cmpb $27, %r9b
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
	movd -4(%rsp), %xmm1
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
	movzwl %r10w, %edx
	pshufd $238, %xmm1, %xmm0
	paddd %xmm1, %xmm0
	pshufd $85, %xmm0, %xmm1
	paddd %xmm0, %xmm1
	movl %r9d, %r11d
	movd %xmm1, %r9d
	addl %edx, %r9d
	movzwl %r9w, %edx
	shrl $16, %r9d
	addl %edx, %r9d
	movl %r9d, %r10d
	shrl $16, %r10d
	addl %r9d, %r10d
	cmpb $17, %r11b
	sete %dl
	andb %al, %dl
	movl %ebp, %eax
	orb %dl, %al
	xorl %r9d, %r9d
	cmpb $69, -9(%rsp)
	sete %r9b
	rolw $8, %r8w
	xorl %r10d, %r8d
	cmpw $-1, %r8w
	sete %r8b
	andb %r9b, %r8b
	testb %cl, %cl
	setne %cl
	movzbl %r8b, %r8d
	cmovel %r8d, %r9d
	andb %dil, %bpl
	andb %sil, %dl
	orb %bpl, %dl
	orb %al, %cl
	orb %cl, %r8b
	xorb $5, %r8b
	movzbl %r8b, %eax
	movzbl %bl, %ecx
	testb %dl, %dl
	cmovel %eax, %ecx
	cmpb $0, -11(%rsp)
	leal 3(%rdx), %eax
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
